#!/usr/bin/env bash
# make test's libfabric 2.1 pass: the libfabric subset of make test
# (make test-libfabric-subset) built against the libfabric 2.1 that make
# deps builds into .deps/libfabric-2.1, and run on it. When that build is
# missing, says so loudly and skips, or fails when FERRY_TEST_REQUIRE lists
# libfabric2 (or all).
#   test-libfabric2.sh [MAKE]
set -uo pipefail
make_cmd=${1:-make}
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$root/.deps/libfabric-2.1

required() {
	case ",${FERRY_TEST_REQUIRE:-}," in *,libfabric2,* | *,all,*) return 0 ;; esac
	return 1
}

if [ ! -s "$prefix/.ferry-build" ] || [ ! -e "$prefix/lib/libfabric.so.1" ]; then
	msg="libfabric 2.1 is not built in $prefix (make deps says why; scripts/deps-libfabric2.sh builds it)"
	if required; then
		echo "test-libfabric2: FAIL: $msg, and FERRY_TEST_REQUIRE lists libfabric2" >&2
		exit 1
	fi
	echo "test-libfabric2: SKIPPED: $msg: ferry not tested against libfabric 2.1" >&2
	exit 0
fi
echo "test-libfabric2: against $prefix ($(sed -n 2p "$prefix/.ferry-build"))"
exec $make_cmd --no-print-directory -C "$root" LIBFABRIC=2.1 test-libfabric-subset
