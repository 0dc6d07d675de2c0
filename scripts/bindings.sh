#!/usr/bin/env bash
# libferry, the C ABI: build it, or install it with its header and a
# pkg-config file.
#
#   scripts/bindings.sh build OUTDIR
#       OUTDIR/libferry.so.X.Y.Z (SONAME libferry.so.X), stripped, its
#       symbols and DWARF in OUTDIR/libferry.so.X.Y.Z.debug, the symlinks
#       libferry.so.X and libferry.so, and ferry.h
#   scripts/bindings.sh install OUTDIR PREFIX [DESTDIR]
#       DESTDIR/PREFIX/lib/libferry.so*, DESTDIR/PREFIX/include/ferry.h and
#       DESTDIR/PREFIX/lib/pkgconfig/ferry.pc (prefix=PREFIX)
#
# X.Y.Z is FERRY_VERSION from ferry.h; the major version is the ABI: a
# program linked against libferry.so.1 keeps loading any 1.y.z.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
header="$root/bindings/ferry.h"
ver() { awk -v n="FERRY_VERSION_$1" '$1 == "#define" && $2 == n { print $3 }' "$header"; }
major=$(ver MAJOR) minor=$(ver MINOR) patch=$(ver PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || { echo "bindings.sh: no FERRY_VERSION in $header" >&2; exit 1; }
real="libferry.so.$major.$minor.$patch"
soname="libferry.so.$major"

build() {
	local out=$1
	mkdir -p "$out"
	# go build skips a link whose output looks up to date and cannot see a
	# changed version script: start from nothing.
	rm -f "$out"/libferry.so* "$out/libferry.h"
	GO=${GO:-go}
	command -v "$GO" >/dev/null 2>&1 || GO=/usr/local/go/bin/go
	# grpcnotrace: gRPC (the etcd directory's client) leaves out its
	# request-tracing pages, golang.org/x/net/trace; their html/template
	# makes the linker keep every exported method of every type in the
	# library (5 MB of 26). Nothing in libferry serves those pages.
	(cd "$root" && "$GO" build -buildmode=c-shared -tags grpcnotrace \
		-ldflags="-extldflags=-Wl,--version-script=$root/bindings/libferry.map,-soname,$soname" \
		-o "$out/$real" ./bindings)
	rm -f "$out"/libferry*.h # cgo's generated header: ferry.h is the contract
	# The library ships without its symbol table and DWARF (a third of the
	# file); they go to $real.debug beside it, which gdb and perf find
	# through the debug link when it sits next to the library or under
	# /usr/lib/debug. Go's own tracebacks need neither.
	if command -v objcopy >/dev/null 2>&1; then
		objcopy --only-keep-debug "$out/$real" "$out/$real.debug"
		objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$out/$real.debug" "$out/$real"
	else
		echo "bindings: no objcopy: $out/$real keeps its debug information" >&2
	fi
	ln -sf "$real" "$out/$soname"
	ln -sf "$soname" "$out/libferry.so"
	cp "$header" "$out/ferry.h"
	echo "bindings: $out/$real (SONAME $soname), $out/ferry.h"
}

install_to() {
	local out=$1 prefix=$2 destdir=${3:-}
	[ -f "$out/$real" ] || { echo "bindings.sh: $out/$real missing: build first" >&2; exit 1; }
	case "$prefix" in /*) ;; *) echo "bindings.sh: PREFIX must be absolute, got $prefix" >&2; exit 1 ;; esac
	local lib="$destdir$prefix/lib" inc="$destdir$prefix/include"
	mkdir -p "$lib/pkgconfig" "$inc"
	install -m 0755 "$out/$real" "$lib/$real"
	ln -sf "$real" "$lib/$soname"
	ln -sf "$soname" "$lib/libferry.so"
	install -m 0644 "$header" "$inc/ferry.h"
	sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$major.$minor.$patch|g" \
		"$root/bindings/ferry.pc.in" >"$lib/pkgconfig/ferry.pc"
	chmod 0644 "$lib/pkgconfig/ferry.pc"
	echo "bindings: installed $real, ferry.h and ferry.pc under $destdir$prefix"
}

case "${1:-}" in
build) [ $# -eq 2 ] || { echo "usage: $0 build OUTDIR" >&2; exit 2; }; build "$2" ;;
install) [ $# -ge 3 ] && [ $# -le 4 ] || { echo "usage: $0 install OUTDIR PREFIX [DESTDIR]" >&2; exit 2; }
	install_to "$2" "$3" "${4:-}" ;;
*) echo "usage: $0 build OUTDIR | install OUTDIR PREFIX [DESTDIR]" >&2; exit 2 ;;
esac
