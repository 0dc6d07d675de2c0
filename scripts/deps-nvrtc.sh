#!/usr/bin/env bash
# Makes NVRTC (the CUDA runtime compiler) available for the kernel compile
# gate, which needs no GPU and no driver. When no NVRTC is found, on
# Debian 12 it installs libnvrtc11.2 (NVRTC 11.8) and libnvrtc-builtins11.8
# from Debian's non-free component, adding a sources entry for that
# component first when apt has none. Idempotent; says what it did.
# Never fails the build: without NVRTC the gate test skips with a message,
# unless FERRY_TEST_REQUIRE names nvrtc.
#
#   FERRY_NVRTC=/path/libnvrtc.so   use that library (nothing installed)
#   FERRY_SKIP_NVRTC=1              do nothing
set -uo pipefail

say() { echo "deps: nvrtc: $*"; }

if [ -n "${FERRY_SKIP_NVRTC:-}" ]; then
	say "FERRY_SKIP_NVRTC set: not looking for NVRTC"
	exit 0
fi

find_nvrtc() {
	if [ -n "${FERRY_NVRTC:-}" ] && [ -e "$FERRY_NVRTC" ]; then
		echo "$FERRY_NVRTC"
		return 0
	fi
	local d f
	for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
		[ -n "$d" ] || continue
		for f in "$d"/lib64/libnvrtc.so* "$d"/lib/libnvrtc.so*; do
			[ -s "$f" ] && { echo "$f"; return 0; }
		done
	done
	f=$(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ && !/builtins/ { print $NF; exit }')
	[ -n "$f" ] && { echo "$f"; return 0; }
	for f in /usr/lib/x86_64-linux-gnu/libnvrtc.so* /usr/lib/aarch64-linux-gnu/libnvrtc.so*; do
		case "$f" in *builtins*) continue ;; esac
		[ -s "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}

if lib=$(find_nvrtc); then
	say "found $lib"
	exit 0
fi

codename=""
[ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${ID:-}-${VERSION_CODENAME:-}")
if [ "$codename" != "debian-bookworm" ]; then
	say "not found, and this is not Debian 12 ($codename): install NVRTC (CUDA toolkit, or"
	say "  a libnvrtc package) to run the kernel compile gate; it skips until then"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	say "not found and no apt-get: the kernel compile gate will skip"
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; else
		say "not found; as root run: $0 (adds Debian's non-free component and installs libnvrtc11.2)"
		exit 0
	fi
fi
export DEBIAN_FRONTEND=noninteractive

# Does any apt source already offer bookworm's non-free component?
has_nonfree() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		# deb822 stanzas: Suites and Components of one stanza.
		awk 'BEGIN { RS = ""; FS = "\n" }
			{ s = 0; c = 0; en = 1
			  for (i = 1; i <= NF; i++) {
				if ($i ~ /^Suites:.*(^|[ \t])bookworm([ \t]|$)/) s = 1
				if ($i ~ /^Components:.*(^|[ \t])non-free([ \t]|$)/) c = 1
				if ($i ~ /^Enabled:[ \t]*no/) en = 0
			  }
			  if (s && c && en) found = 1 }
			END { exit found ? 0 : 1 }' "$f" && return 0
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		grep -Eq '^[[:space:]]*deb[[:space:]].*[[:space:]]bookworm[[:space:]].*[[:space:]]non-free([[:space:]]|$)' "$f" && return 0
	done
	return 1
}

entry=/etc/apt/sources.list.d/ferry-nonfree.sources
added=""
if has_nonfree; then
	say "apt already has Debian's non-free component"
else
	added=1
	say "adding $entry (Debian bookworm, components non-free contrib)"
	$SUDO tee "$entry" >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi

policy=$(apt-cache policy libnvrtc11.2 2>/dev/null)
if [ -n "$added" ] || ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
	say "apt-get update"
	$SUDO apt-get update -qq || { say "apt-get update failed (network?): the kernel compile gate will skip"; exit 0; }
fi
say "installing libnvrtc11.2 libnvrtc-builtins11.8 (NVRTC 11.8, about 16 MB)"
if ! $SUDO apt-get install -y -qq --no-install-recommends libnvrtc11.2 libnvrtc-builtins11.8 >/dev/null; then
	say "apt-get install failed: the kernel compile gate will skip"
	exit 0
fi
if lib=$(find_nvrtc); then say "installed $lib"; else say "installed, but no libnvrtc.so found afterwards"; fi
exit 0
