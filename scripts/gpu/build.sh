#!/usr/bin/env bash
# Builds the GPU test binaries here (a machine with Go, no GPU needed) and
# gathers what they need into .gpu/ (git-ignored), for scripts/gpu/run.sh
# to run on the GPU machine, which has the NVIDIA driver and CUDA but no
# Go and no libfabric.
#
#   scripts/gpu/build.sh                 # packages whose tests use CUDA
#   GPU_PKGS="./cuda ./a2a" scripts/gpu/build.sh
#
# Output:
#   .gpu/bin/<name>.test   test binaries (go test -c)
#   .gpu/bin/bench-a2a     the a2a benchmark (one-GPU tables)
#   .gpu/lib/              shared libraries they link that are not part of
#                          the C library (libfabric and its dependencies)
#   .gpu/manifest          "<binary> <package dir>" per line
#   .gpu/BUILD             commit, Go version, date
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
OUT=.gpu
GO=${GO:-go}

# Packages to build: GPU_PKGS, else every package whose tests import
# ferry's cuda package (or are that package).
if [ -n "${GPU_PKGS:-}" ]; then
	pkgs=$GPU_PKGS
else
	pkgs=$($GO list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... 2>/dev/null |
		awk '{ for (i = 1; i <= NF; i++) if ($i == "github.com/ferryrdma/ferry/cuda") { print $1; break } }' | sort -u)
	pkgs="github.com/ferryrdma/ferry/cuda $pkgs"
	pkgs=$(printf '%s\n' $pkgs | sort -u | tr '\n' ' ')
fi

rm -rf "$OUT/bin" "$OUT/lib" "$OUT/manifest"
mkdir -p "$OUT/bin" "$OUT/lib"
: >"$OUT/manifest"
failed=()
for p in $pkgs; do
	dir=$($GO list -f '{{.Dir}}' "$p")
	rel=${dir#"$PWD"/}
	name=$(echo "$rel" | tr '/' '_')
	echo "gpu-build: $p -> $OUT/bin/$name.test"
	if ! $GO test -c -o "$OUT/bin/$name.test" "$p"; then
		failed+=("$p")
		continue
	fi
	if [ -f "$OUT/bin/$name.test" ]; then
		echo "$name.test $rel" >>"$OUT/manifest"
	else
		echo "gpu-build: $p has no tests"
	fi
done

# bench-a2a, for the one-GPU tables (run.sh runs it after the tests).
echo "gpu-build: bench-a2a -> $OUT/bin/bench-a2a"
if ! $GO build -o "$OUT/bin/bench-a2a" ./bench/bench-a2a; then
	failed+=("./bench/bench-a2a")
fi

# Libraries: the ldd closure of every binary, minus the C library and the
# loader (same glibc on both machines), minus the NVIDIA driver and CUDA
# (they belong to the GPU machine; ferry opens them with dlopen anyway).
skip_re='/(ld-linux[^/]*|libc\.so[^/]*|libm\.so[^/]*|libpthread\.so[^/]*|libdl\.so[^/]*|librt\.so[^/]*|libresolv\.so[^/]*|libgcc_s\.so[^/]*|libstdc\+\+\.so[^/]*|libcuda\.so[^/]*|libnvrtc[^/]*|libcudart[^/]*|libgdrapi[^/]*)$'
for b in "$OUT"/bin/*.test "$OUT/bin/bench-a2a"; do
	[ -e "$b" ] || continue
	ldd "$b" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
		if [[ "$lib" =~ $skip_re ]]; then continue; fi
		cp -Lf "$lib" "$OUT/lib/"
	done
done

{
	echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo +dirty)"
	echo "go $($GO env GOVERSION)"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
} >"$OUT/BUILD"

echo "gpu-build: $(wc -l <"$OUT/manifest") test binaries, bench-a2a, $(ls "$OUT/lib" | wc -l) libraries in $OUT/"
if [ ${#failed[@]} -gt 0 ]; then
	echo "gpu-build: FAILED to build: ${failed[*]}" >&2
	exit 1
fi
