#!/usr/bin/env bash
# Builds libfabric 2.1 (the generation Debian trixie and current EFA
# installers ship) into a project-local prefix, beside the system's 1.17,
# so ferry is built and tested against both. The source is the upstream
# tarball trixie serves (libfabric_2.1.0.orig.tar.xz), fetched with a
# private apt configuration: trixie is never added to the system's sources
# and nothing outside the prefix and its work directory is written.
#
# Providers: tcp, shm and rxm always; verbs and efa when bookworm's
# rdma-core headers allow it (without a device efa loads and reports none).
#
# Cached: skipped when the prefix holds a build of this version with these
# options. Never fails `make deps` (the 1.17 path must keep working): a
# failed build says so loudly and the 2.1 tests then skip, or fail under
# FERRY_TEST_REQUIRE=libfabric2.
#
#   FERRY_LIBFABRIC2_PREFIX=DIR   where to install (default .deps/libfabric-2.1)
#   FERRY_SKIP_LIBFABRIC2=1       do nothing
set -uo pipefail

say() { echo "deps: libfabric 2.1: $*"; }
loud() {
	echo "deps: libfabric 2.1: ============================================================" >&2
	echo "deps: libfabric 2.1: $*" >&2
	echo "deps: libfabric 2.1: the 2.1 tests skip (FERRY_TEST_REQUIRE=libfabric2 fails them)" >&2
	echo "deps: libfabric 2.1: ============================================================" >&2
}

if [ -n "${FERRY_SKIP_LIBFABRIC2:-}" ]; then
	say "FERRY_SKIP_LIBFABRIC2 set: not building"
	exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
version=2.1.0
tarball=libfabric_${version}.orig.tar.xz
sha256=1a66369772d5bb151737214af1c478993e969cf298e8f9ed369e7a2ab8d8c6df
prefix=${FERRY_LIBFABRIC2_PREFIX:-$root/.deps/libfabric-2.1}
work=$root/.deps/work-libfabric-2.1
stamp=$prefix/.ferry-build

base_opts="--enable-tcp --enable-shm --enable-rxm --disable-sm2 --disable-lnx --disable-psm2 --disable-psm3 --disable-opx --disable-usnic --disable-ucx --disable-lpp --disable-cxi --disable-sockets --disable-udp --disable-rxd --disable-mrail --disable-perf --disable-hook_debug --disable-hook_hmem --disable-dmabuf_peer_mem --disable-trace --disable-profile"
rdma_opts="--enable-verbs --enable-efa"

# One build at a time (parallel makes call make deps too): a second one
# waits here, then finds the first one's result cached.
mkdir -p "$work" || { loud "cannot create $work"; exit 0; }
if command -v flock >/dev/null 2>&1; then
	exec 9>"$work/lock"
	flock 9
fi

# The stamp names the version and options: changing either rebuilds.
want="version=$version options=$(echo "$base_opts $rdma_opts" | cksum | cut -d' ' -f1)"
if [ -s "$stamp" ] && [ "$(head -1 "$stamp")" = "$want" ] && [ -e "$prefix/lib/libfabric.so.1" ] &&
	[ -e "$prefix/lib/pkgconfig/libfabric.pc" ]; then
	say "cached in $prefix ($(sed -n 2p "$stamp"))"
	exit 0
fi

need_tools=""
for tool in autoconf automake libtoolize make gcc xz; do
	command -v "$tool" >/dev/null 2>&1 || need_tools=1
done
if [ -n "$need_tools" ]; then
	if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
		say "installing the build tools (autoconf automake libtool make gcc xz-utils)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			autoconf automake libtool make gcc xz-utils >/dev/null ||
			{ loud "could not install autoconf, automake, libtool"; exit 0; }
	else
		loud "needs autoconf, automake, libtool, make, gcc and xz to build (as root: apt-get install them)"
		exit 0
	fi
fi

# The rdma-core development files the verbs and efa providers build
# against (bookworm's rdma-core 44). Their absence only drops those two.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
	missing=()
	[ -e /usr/include/infiniband/efadv.h ] || missing+=(libibverbs-dev)
	[ -e /usr/include/rdma/rdma_cma.h ] || missing+=(librdmacm-dev)
	[ -e /usr/include/libnl3/netlink/netlink.h ] || missing+=(libnl-3-dev libnl-route-3-dev)
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing ${missing[*]} (for the verbs and efa providers)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
			say "could not install ${missing[*]}: verbs and efa may be left out"
	fi
fi

src=$work/$tarball

if ! echo "$sha256  $src" | sha256sum -c --status 2>/dev/null; then
	if ! command -v apt-get >/dev/null 2>&1; then
		loud "no apt-get to fetch $tarball; put it in $work by hand"
		exit 0
	fi
	# A private apt configuration: trixie's deb-src only, its own lists and
	# cache, so the system's sources and package lists are untouched.
	apt_dir=$work/apt
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian trixie main" >"$apt_dir/sources.list"
	apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=-
		-o "Dir::State::lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
		-o APT::Sandbox::User=root -qq)
	say "fetching $tarball (trixie deb-src, private apt configuration in $apt_dir)"
	apt-get "${apt_opts[@]}" update >"$work/fetch.log" 2>&1 ||
		{ tail -5 "$work/fetch.log" >&2; loud "apt-get update of trixie's deb-src failed (network?)"; exit 0; }
	# Only the orig tarball is served; the .dsc and debian.tar.xz 404, so
	# apt-get source reports an error even when the tarball arrived.
	(cd "$work" && apt-get "${apt_opts[@]}" source --download-only libfabric >>"$work/fetch.log" 2>&1) || true
	if ! echo "$sha256  $src" | sha256sum -c --status 2>/dev/null; then
		tail -5 "$work/fetch.log" >&2
		loud "$tarball missing or its sha256 differs"
		exit 0
	fi
fi

build=$work/build
rm -rf "$build" && mkdir -p "$build"
log=$work/build.log
say "building in $build (about 4 minutes on 2 cores; log $log)"
start=$(date +%s)
tar -xJf "$src" -C "$build" || { loud "cannot unpack $src"; exit 0; }
srcdir=$build/libfabric-$version

configure() {
	# shellcheck disable=SC2086 # the option strings are word lists
	(cd "$srcdir" && ./configure --prefix="$prefix" --disable-static $base_opts "$@") >>"$log" 2>&1
}
: >"$log"
if ! (cd "$srcdir" && ./autogen.sh) >>"$log" 2>&1; then
	tail -20 "$log" >&2
	loud "autogen.sh failed (log $log)"
	exit 0
fi
providers="tcp shm rxm verbs efa"
# shellcheck disable=SC2086
if ! configure $rdma_opts; then
	say "configure with verbs and efa failed (rdma-core headers too old?): retrying without them"
	grep -E "error|WARNING" "$log" | tail -5
	providers="tcp shm rxm"
	if ! configure; then
		tail -20 "$log" >&2
		loud "configure failed (log $log)"
		exit 0
	fi
fi
jobs=$(nproc 2>/dev/null || echo 2)
if ! (cd "$srcdir" && make -j"$jobs") >>"$log" 2>&1; then
	tail -30 "$log" >&2
	loud "make failed (log $log)"
	exit 0
fi
# A project-local prefix is replaced whole, so no file of an older build
# stays behind; one given by FERRY_LIBFABRIC2_PREFIX is only installed into.
case "$prefix" in "$root"/.deps/*) rm -rf "$prefix" ;; esac
if ! (cd "$srcdir" && make install) >>"$log" 2>&1; then
	tail -30 "$log" >&2
	loud "make install failed (log $log)"
	exit 0
fi
if [ ! -e "$prefix/lib/libfabric.so.1" ]; then
	loud "installed, but $prefix/lib/libfabric.so.1 is missing (log $log)"
	exit 0
fi
printf '%s\nproviders: %s\n' "$want" "$providers" >"$stamp"
rm -rf "$build"
say "built in $(($(date +%s) - start)) s into $prefix (providers: $providers)"
exit 0
