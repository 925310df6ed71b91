#!/usr/bin/env bash
# Boot a kernel and initramfs under QEMU (TCG: no KVM needed) with cgroup v1 off; the
# guest's serial console goes to stdout. exec's QEMU, so the caller's pid is QEMU's
# (the Rust test kills it by that pid on every path).
#
#   scripts/vm/boot.sh KERNEL_DIR INITRD
#
# WARREN_VM_APPEND adds to the kernel command line; NAME=value words there reach the
# guest's scenario as environment variables (the kernel passes them to init), e.g.
# WARREN_VM_APPEND="WARREN_VM_MEASURE_ROUNDS=3" for the clone3 boot-latency rounds.
#
# Needs e2fsprogs (mkfs.ext4) for the guest's data disk, INITRD.disk.
set -euo pipefail
kdir=${1:?usage: boot.sh KERNEL_DIR INITRD}
initrd=${2:?usage: boot.sh KERNEL_DIR INITRD}
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
    echo "boot.sh: qemu-system-x86_64 not found; apt-get install -t bookworm-backports --no-install-recommends qemu-system-x86 (scripts/test.sh does)" >&2
    exit 127
fi
kernel=$(echo "$kdir"/boot/vmlinuz-*)
# The state root's disk: ext4, as /var/lib on a Debian host (tmpfs, the initramfs's
# own filesystem, takes idmapped mounts only from 6.3 on). A sparse file beside the
# initramfs, made fresh for every boot.
disk="$initrd.disk"
rm -f "$disk"
truncate -s 2G "$disk"
mkfs.ext4 -q -F -L warren "$disk"
exec "$qemu" -M q35 -accel tcg,thread=multi -smp 2 -m 1024 -cpu max \
    -nodefaults -no-reboot -display none -serial stdio \
    -drive "file=$disk,if=virtio,format=raw,cache=unsafe" \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 cgroup_no_v1=all quiet panic=-1 rdinit=/init${WARREN_VM_APPEND:+ $WARREN_VM_APPEND}"
