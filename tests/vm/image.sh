#!/usr/bin/env bash
# Builds the verbs test VM: Debian's kernel (downloaded, never installed)
# and an initramfs with busybox, iproute2, the rxe verbs provider, the
# shared libraries everything needs, the kernel modules for Soft-RoCE, and
# the test binaries found in $STAGE_IN (tests/*.test, run/*.sh, bin/*).
#
#   image.sh <cache dir> <stage-in dir>   -> <cache>/vmlinuz, <cache>/initramfs.gz
#
# KERNEL_DEB=/path/linux-image-*.deb picks another kernel.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=$1
stage_in=$2
mkdir -p "$cache"

if [ -n "${KERNEL_DEB:-}" ]; then
	kpkg=$(dpkg-deb -f "$KERNEL_DEB" Package)
	deb=$KERNEL_DEB
else
	# The ABI package linux-image-amd64 depends on today; old ones vanish
	# from the mirror after point releases, so it is never pinned.
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[ -n "$kpkg" ] || { echo "image: cannot resolve linux-image-amd64 (apt-get update?)" >&2; exit 1; }
	deb=$(ls "$cache"/${kpkg}_*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		(cd "$cache" && apt-get download -q -o APT::Sandbox::User=root "$kpkg" >/dev/null)
		deb=$(ls "$cache"/${kpkg}_*.deb | head -1)
	fi
fi
kver=${kpkg#linux-image-}
kroot=$cache/kernel-$kver
if [ ! -e "$kroot/boot/vmlinuz-$kver" ]; then
	rm -rf "$kroot.tmp"
	dpkg -x "$deb" "$kroot.tmp"
	mv "$kroot.tmp" "$kroot"
fi
# Newer kernels keep modules under usr/lib; modprobe -d looks in lib.
[ -e "$kroot/lib" ] || ln -s usr/lib "$kroot/lib"
[ -e "$kroot/lib/modules/$kver/modules.dep" ] || depmod -b "$kroot" "$kver"
cp "$kroot/boot/vmlinuz-$kver" "$cache/vmlinuz"

root=$cache/root
rm -rf "$root"
mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{proc,sys,dev,tmp,etc,ferry/tests,ferry/run,ferry/bin}
for d in bin sbin lib lib64; do ln -s usr/$d "$root/$d"; done

# Modules in dependency order, decompressed (busybox insmod wants .ko).
# crc32_generic first: rxe asks for the "crc32" hash through
# request_module, which a modprobe-less initramfs cannot answer.
mods=$root/etc/ferry-modules
: >"$mods"
for m in veth bridge crc32_generic rdma_rxe; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" | while read -r _ path args; do
		rel=${path#"$kroot"/lib/modules/"$kver"/}
		rel=${rel%.xz}
		rel=${rel%.zst}
		grep -q "^$rel " "$mods" && continue
		mkdir -p "$root/lib/modules/$kver/$(dirname "$rel")"
		case $path in
		*.xz) xz -dc "$path" >"$root/lib/modules/$kver/$rel" ;;
		*.zst) zstd -dcq "$path" >"$root/lib/modules/$kver/$rel" ;;
		*) cp "$path" "$root/lib/modules/$kver/$rel" ;;
		esac
		echo "$rel $args" >>"$mods"
	done
done

# An ELF and its shared-library closure (ldd), symlinks resolved.
add_elf() {
	local src=$1 dst=${2:-$1}
	mkdir -p "$root/$(dirname "$dst")"
	cp -L "$src" "$root/$dst"
	ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' | while read -r lib; do
		[ -e "$root/$lib" ] && continue
		mkdir -p "$root/$(dirname "$lib")"
		cp -L "$lib" "$root/$lib"
	done
}
cp /bin/busybox "$root/usr/bin/busybox"
ln -s busybox "$root/usr/bin/sh"
for b in /sbin/ip /usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo; do
	add_elf "$b"
done
provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -1)
add_elf "$provider"
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
for f in "$stage_in"/tests/*.test "$stage_in"/bin/*; do
	[ -f "$f" ] || continue
	add_elf "$f" "/ferry/${f#"$stage_in"/}"
done
[ -f "$stage_in/testargs" ] && cp "$stage_in/testargs" "$root/ferry/testargs"
[ -f "$stage_in/env" ] && cp "$stage_in/env" "$root/ferry/env"
for f in "$stage_in"/run/*.sh; do
	[ -f "$f" ] && cp "$f" "$root/ferry/run/"
done
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
install -m 0755 "$here/guest-init.sh" "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$cache/initramfs.gz")
echo "image: kernel $kver, initramfs $(du -h "$cache/initramfs.gz" | cut -f1)"
