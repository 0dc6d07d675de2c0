#!/usr/bin/env bash
# Paired comparison of the work tree against an earlier revision: builds
# fabric-debug, bench-a2a and the fabric test binary at BASE (a temporary
# git worktree) and here, alternates them N times on the same cases and
# prints medians, min/max and new ÷ base per case (bench/bench-compare).
#
#   scripts/bench-compare.sh BASE [N] [bench-compare flags...]
#   make bench-compare BASE=d288fc5 N=7 [CASES=tcp-64M,null-paged]
set -euo pipefail
if [ $# -lt 1 ] || [ -z "$1" ]; then
	echo "usage: scripts/bench-compare.sh BASE [N] [flags]  (make bench-compare BASE=REV [N=7] [CASES=...])" >&2
	exit 2
fi
base=$1
shift
n=7
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	n=$1
	shift
fi
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=/usr/local/go/bin:$PATH
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
(cd "$root" && go build -o "$tool/bench-compare" ./bench/bench-compare)
cd "$root"
"$tool/bench-compare" --base "$base" --n "$n" "$@"
