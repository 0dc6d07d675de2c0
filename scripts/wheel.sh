#!/usr/bin/env bash
# The Python wheel, offline: dist/ferry_rdma-<version>-py3-none-<platform>.whl
# at the repository root, carrying libferry.so.1 from OUTDIR (built by
# scripts/bindings.sh). Debian's python3-build, -setuptools and -wheel
# build it without isolation (an isolated build would ask PyPI).
#
#   scripts/wheel.sh OUTDIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=$(cd "${1:?usage: $0 OUTDIR}" && pwd)
py=${PYTHON:-/usr/bin/python3}
lib="$out/libferry.so.1"
[ -e "$lib" ] || { echo "wheel.sh: $lib missing: run scripts/bindings.sh build $out first" >&2; exit 1; }
stage="$out/wheel-src"
rm -rf "$stage"
mkdir -p "$stage"
# Build from a copy: the package tree stays free of build/ and egg-info,
# and the library lands in the package only here.
cp -r "$root/bindings/python/ferry" "$root/bindings/python/pyproject.toml" "$root/bindings/python/setup.py" \
	"$root/bindings/python/README.md" "$stage/"
cp "$root/bindings/ferry.h" "$stage/ferry.h"
rm -rf "$stage/ferry/_lib" "$stage/ferry/__pycache__"
mkdir -p "$stage/ferry/_lib"
cp -L "$lib" "$stage/ferry/_lib/libferry.so.1"
mkdir -p "$root/dist"
rm -f "$root"/dist/ferry_rdma-*.whl
(cd "$stage" && "$py" -m build --wheel --no-isolation --outdir "$root/dist" >"$out/wheel-build.log" 2>&1) || {
	cat "$out/wheel-build.log" >&2
	exit 1
}
rm -rf "$stage"
ls "$root"/dist/ferry_rdma-*.whl
