#!/usr/bin/env bash
# Build the guest's initramfs: static busybox, warren's binaries with the shared
# libraries they need, a few kernel modules of the chosen kernel, the guest init and
# the scenario.
#
#   scripts/vm/build-initramfs.sh KERNEL_DIR BIN_DIR OUT.cpio.gz
#
# KERNEL_DIR: what fetch-kernel.sh printed; BIN_DIR: holds warren and warren-init (a
# release build). Needs busybox-static (its cpio writes the archive) and xz-utils
# (newer kernels ship their modules xz-compressed; busybox insmod wants them plain).
set -euo pipefail
kdir=${1:?usage: build-initramfs.sh KERNEL_DIR BIN_DIR OUT.cpio.gz}
bindir=${2:?usage: build-initramfs.sh KERNEL_DIR BIN_DIR OUT.cpio.gz}
out=${3:?usage: build-initramfs.sh KERNEL_DIR BIN_DIR OUT.cpio.gz}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
busybox=/bin/busybox
if ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked' && ! ldd "$busybox" 2>&1 | grep -q 'not a dynamic'; then
    echo "build-initramfs.sh: $busybox is not static; apt-get install busybox-static" >&2
    exit 1
fi
for b in warren warren-init; do
    [ -x "$bindir/$b" ] || { echo "build-initramfs.sh: $bindir/$b missing; cargo build --release first" >&2; exit 1; }
done
moddir=$(echo "$kdir"/lib/modules/*)
kver=$(basename "$moddir")

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,proc,sys,dev,tmp,run,root,contrib,var/lib}
cp "$busybox" "$root/bin/busybox"
for b in warren warren-init; do
    cp "$bindir/$b" "$root/usr/local/bin/$b"
    strip "$root/usr/local/bin/$b" 2>/dev/null || true
done
# mkfs.ext4 for disk.max images (e2fsprogs; the scenario's disk.max check).
mkfs=$(command -v mkfs.ext4 || true)
if [ -n "$mkfs" ]; then
    cp -L "$mkfs" "$root/usr/sbin/mkfs.ext4"
    [ -e /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$root/etc/"
fi
# The shared libraries of warren's binaries (and mkfs.ext4), at the same paths as on
# the build host.
# (warren-init is a plain static executable: ldd says "not a dynamic executable", exit 1.)
for b in "$bindir/warren" "$bindir/warren-init" ${mkfs:+"$mkfs"}; do
    { ldd "$b" 2>/dev/null || true; } | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
done | sort -u | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
# /lib64 is a link on Debian; keep the loader's path working.
if [ -e /lib64/ld-linux-x86-64.so.2 ] && [ ! -e "$root/lib64/ld-linux-x86-64.so.2" ]; then
    mkdir -p "$root/lib64"
    cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
fi

# Modules the scenario needs, with their dependencies (modules.sh).
# zram's default compressors (lzo-rle on 6.1, lz4 on 6.12): no modprobe in the guest to
# load them on demand.
# nf_tables and its bridge meta expressions: the bridge filter of `net = "bridge"`.
. "$here/modules.sh"
vm_modules "$root" "$moddir" "virtio_pci virtio_blk overlay loop veth bridge zram lzo_rle lzo lz4 nf_tables nft_meta_bridge"

cp "$here/guest-init.sh" "$root/init"
cp "$here/guest-stage2.sh" "$root/stage2"
cp "$here/scenario.sh" "$root/scenario.sh"
cp "$repo/contrib/"*.service "$root/contrib/"
chmod +x "$root/init" "$root/stage2" "$root/scenario.sh"
echo "$kver" > "$root/etc/warren-vm-kernel"
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"

mkdir -p "$(dirname "$out")"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
