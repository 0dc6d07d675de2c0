#!/usr/bin/env bash
# Fetches the second compiler generation and the disassemblers of the
# kernel compile gate into a project-local directory (default .deps/, git
# ignored, kept between runs):
#   .deps/cuda-12.4/lib/libnvrtc.so.12 (+ libnvrtc-builtins.so.12.4)
#       Debian trixie non-free libnvrtc12 + libnvrtc-builtins12.4
#   .deps/cuda-12.4/bin/{nvdisasm,cuobjdump}  trixie non-free nvidia-cuda-toolkit
#   .deps/cuda-11.8/bin/{nvdisasm,cuobjdump}  bookworm non-free nvidia-cuda-toolkit
# (NVRTC 11.8 itself is deps-nvrtc.sh's: the system package libnvrtc11.2.)
#
# The packages come through a private apt configuration (its own source
# list, lists and cache under .deps/apt): trixie is never added to the
# system's sources and nothing is installed into the system. Only the
# files named above are unpacked; the .deb files are deleted afterwards
# (about 190 MB downloaded once, 120 MB kept).
#
# Never fails the build. A failure says so loudly ("FAILED"), and the
# gate's NVRTC 12 generation and the SASS check then skip with a message
# (they fail under FERRY_TEST_REQUIRE=nvrtc12 / sass).
#
#   FERRY_DEPS_DIR=/path     use that directory instead of .deps
#   FERRY_SKIP_CUDATOOLS=1   do nothing
set -uo pipefail

say() { echo "deps: cuda-tools: $*"; }
fail() {
	say "FAILED: $*"
	say "  the kernel gate's NVRTC 12 generation and SASS check will skip"
	exit 0
}

if [ -n "${FERRY_SKIP_CUDATOOLS:-}" ]; then
	say "FERRY_SKIP_CUDATOOLS set: not fetching NVRTC 12 and nvdisasm"
	exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FERRY_DEPS_DIR:-$root/.deps}
arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)

have() { [ -x "$dir/cuda-11.8/bin/nvdisasm" ] && [ -x "$dir/cuda-12.4/bin/nvdisasm" ] &&
	[ -e "$dir/cuda-12.4/lib/libnvrtc.so.12" ] && [ -e "$dir/cuda-12.4/lib/libnvrtc-builtins.so.12.4" ]; }
if have; then
	say "cached in $dir (cuda-11.8/bin, cuda-12.4/{bin,lib})"
	exit 0
fi
[ "$arch" = amd64 ] || fail "only amd64 is fetched (this is $arch)"
command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || fail "needs apt-get and dpkg-deb"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || fail "no $keyring (package debian-archive-keyring)"

apt="$dir/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" || fail "cannot create $apt"
cat >"$apt/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm non-free
deb [signed-by=$keyring] http://deb.debian.org/debian trixie non-free
EOF
aptopts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$apt/lists"
	-o "Dir::Cache=$apt/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root -o Debug::NoLocking=1)

say "apt-get update (private lists in $apt: bookworm and trixie non-free)"
apt-get "${aptopts[@]}" -qq update || fail "apt-get update of the private lists failed (network?)"

# version PKG SUITE: the candidate version of PKG in SUITE.
version() {
	apt-cache "${aptopts[@]}" madison "$1" 2>/dev/null | awk -v s="$2/" '$0 ~ s { print $3; exit }'
}
fetch() { # fetch PKG SUITE -> path of the .deb
	local v
	v=$(version "$1" "$2")
	[ -n "$v" ] || { say "no $1 in $2 non-free" >&2; return 1; }
	(cd "$apt/debs" && apt-get "${aptopts[@]}" -qq download "$1=$v" >/dev/null) || { say "download $1=$v failed" >&2; return 1; }
	ls "$apt/debs/$1_"*"_$arch.deb" 2>/dev/null | head -1
}
# unpack DEB DEST MEMBER...: those members of DEB into DEST (flattened).
unpack() {
	local deb=$1 dest=$2 tmp
	shift 2
	tmp=$(mktemp -d "$apt/x.XXXXXX") || return 1
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "$@" || { rm -rf "$tmp"; return 1; }
	mkdir -p "$dest" && for m in "$@"; do cp -a "$tmp/$m" "$dest/"; done
	rm -rf "$tmp"
}

if ! [ -e "$dir/cuda-12.4/lib/libnvrtc.so.12" ] || ! [ -e "$dir/cuda-12.4/lib/libnvrtc-builtins.so.12.4" ]; then
	say "fetching trixie libnvrtc12 and libnvrtc-builtins12.4 (about 18 MB)"
	deb=$(fetch libnvrtc12 trixie) || fail "libnvrtc12"
	bdeb=$(fetch libnvrtc-builtins12.4 trixie) || fail "libnvrtc-builtins12.4"
	lib=./usr/lib/x86_64-linux-gnu
	unpack "$deb" "$dir/cuda-12.4/lib" $(dpkg-deb -c "$deb" | awk '{ print $6 }' | grep "^$lib/libnvrtc\.so") || fail "unpack $deb"
	unpack "$bdeb" "$dir/cuda-12.4/lib" $(dpkg-deb -c "$bdeb" | awk '{ print $6 }' | grep "^$lib/libnvrtc-builtins\.so") || fail "unpack $bdeb"
	rm -f "$deb" "$bdeb"
fi
for pair in bookworm:11.8 trixie:12.4; do
	suite=${pair%%:*} gen=${pair#*:}
	[ -x "$dir/cuda-$gen/bin/nvdisasm" ] && continue
	say "fetching $suite nvidia-cuda-toolkit for nvdisasm and cuobjdump $gen (about 85 MB)"
	deb=$(fetch nvidia-cuda-toolkit "$suite") || fail "nvidia-cuda-toolkit ($suite)"
	unpack "$deb" "$dir/cuda-$gen/bin" ./usr/bin/nvdisasm ./usr/bin/cuobjdump || fail "unpack $deb"
	rm -f "$deb"
	got=$("$dir/cuda-$gen/bin/nvdisasm" --version 2>&1 | grep -o 'release [0-9.]*')
	[ "$got" = "release $gen" ] || fail "$suite's nvdisasm says '$got', expected release $gen"
done
have || fail "incomplete $dir after fetching"
say "ready in $dir: NVRTC $(ls "$dir"/cuda-12.4/lib/libnvrtc.so.12.* | sed 's/.*so\.//'), nvdisasm 11.8 and 12.4"
exit 0
