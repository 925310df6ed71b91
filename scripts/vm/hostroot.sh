#!/usr/bin/env bash
# Run a command in a freshly booted kernel with this host's own userland: the guest's
# root is this host's root filesystem, read-only through virtiofs, under an overlay
# whose upper layer is a tmpfs; /tmp is an ext4 disk of its own. So everything installed
# here (containerd, crun, LXC, python3 with grpcio, warren's builds) runs there,
# on Debian's kernel, cgroup v2 only, with kernel state as fresh as a new boot: for the
# measurements whose figures this long-lived host's own history skews (the per-memory-
# cgroup shrinker state, docs/scaling.md "The superlinear term").
#
#   scripts/vm/hostroot.sh KERNEL_DIR OUT_DIR COMMAND...
#
# KERNEL_DIR: what fetch-kernel.sh printed. OUT_DIR: a directory of this host's (made
# if missing), shared read-write with the guest at the same path; the command runs with
# it as its working directory, its output goes to OUT_DIR/guest.log (and this
# script's stdout) and its exit status to OUT_DIR/guest.rc, which this script exits
# with. The command runs as root in the guest, in a cgroup laid out as systemd does for
# a `Delegate=yes` service (scripts/vm/guest-stage2.sh).
#
# QEMU runs without KVM (TCG): user code runs 5-20× slower than here, so the guest's
# timings say nothing; its memory figures are the kernel's own.
# Environment: WARREN_VM_MEM (MiB, default 8192), WARREN_VM_DISK (GiB, default 16),
# WARREN_VM_WORK (the scratch directory, default a temporary one),
# WARREN_VM_SMP (default 2), WARREN_VIRTIOFSD (default: virtiofsd on PATH or in
# /usr/libexec; `cargo install virtiofsd` builds one, it needs libseccomp-dev and
# libcap-ng-dev).
set -euo pipefail
kdir=${1:?usage: hostroot.sh KERNEL_DIR OUT_DIR COMMAND...}
out=${2:?usage: hostroot.sh KERNEL_DIR OUT_DIR COMMAND...}
shift 2
[ $# -gt 0 ] || { echo "usage: hostroot.sh KERNEL_DIR OUT_DIR COMMAND..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || { echo "hostroot.sh: qemu-system-x86_64 not found; apt-get install -t bookworm-backports --no-install-recommends qemu-system-x86" >&2; exit 127; }
vfsd=${WARREN_VIRTIOFSD:-$(command -v virtiofsd || echo /usr/libexec/virtiofsd)}
[ -x "$vfsd" ] || { echo "hostroot.sh: virtiofsd not found; set WARREN_VIRTIOFSD, or apt-get install libseccomp-dev libcap-ng-dev && cargo install virtiofsd" >&2; exit 127; }
busybox=/bin/busybox
{ ldd "$busybox" 2>&1 || true; } | grep -q 'not a dynamic' || { echo "hostroot.sh: $busybox is not static; apt-get install busybox-static" >&2; exit 1; }
mem=${WARREN_VM_MEM:-8192}
mkdir -p "$out"
out=$(cd "$out" && pwd)
kernel=$(echo "$kdir"/boot/vmlinuz-*)
moddir=$(echo "$kdir"/lib/modules/*)

# The scratch directory (initramfs, disk, sockets): $WARREN_VM_WORK when the caller
# gives one (and removes it: a caller that may SIGKILL this script's process group),
# else a temporary one removed at exit.
if [ -n "${WARREN_VM_WORK:-}" ]; then
    work=$WARREN_VM_WORK
    mkdir -p "$work"
    own_work=
else
    work=$(mktemp -d /tmp/warren-hostroot.XXXXXX)
    own_work=1
fi
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ -n "$own_work" ]; then rm -rf "$work"; else rm -rf "$work/initramfs" "$work/disk" "$work/initrd"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The initramfs: static busybox, the modules, the first stage.
root=$work/initramfs
mkdir -p "$root"/{bin,dev,proc,sys,lower,upper,newroot}
cp "$busybox" "$root/bin/busybox"
. "$here/modules.sh"
vm_modules "$root" "$moddir" "virtio_pci virtio_blk virtiofs overlay loop veth bridge zram lzo_rle lzo lz4 nf_tables nft_meta_bridge"
cp "$here/hostroot-init.sh" "$root/init"
chmod +x "$root/init"
# The command, for the second stage (which runs from this host's tree, read in the guest).
{
    printf 'cd %q\n' "$out"
    printf '%q ' "$@"
    echo
} > "$out/guest.command"
rm -f "$out/guest.rc" "$out/guest.log"
printf '%s\n' "$here/hostroot-stage2.sh" "$out" > "$root/stage2.args"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 > "$work/initrd"

# /tmp's disk, fresh.
truncate -s "${WARREN_VM_DISK:-16}G" "$work/disk"
mkfs.ext4 -q -F -L vmtmp "$work/disk"

# Two shares: this host's root, read-only; OUT_DIR, read-write.
"$vfsd" --socket-path="$work/root.sock" --shared-dir=/ --readonly --cache=auto --no-announce-submounts \
    --sandbox=namespace --log-level=error &
pids+=($!)
"$vfsd" --socket-path="$work/out.sock" --shared-dir="$out" --cache=never \
    --sandbox=namespace --log-level=error &
pids+=($!)
for _ in $(seq 100); do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { echo "hostroot.sh: virtiofsd failed" >&2; exit 1; }; done
    [ -S "$work/root.sock" ] && [ -S "$work/out.sock" ] && break
    sleep 0.1
done

"$qemu" -M q35 -accel tcg,thread=multi -smp "${WARREN_VM_SMP:-2}" -m "$mem" -cpu max \
    -object memory-backend-memfd,id=mem,size="${mem}M",share=on -numa node,memdev=mem \
    -nodefaults -no-reboot -display none -serial stdio \
    -chardev socket,id=root,path="$work/root.sock" -device vhost-user-fs-pci,chardev=root,tag=hostroot \
    -chardev socket,id=out,path="$work/out.sock" -device vhost-user-fs-pci,chardev=out,tag=out \
    -drive "file=$work/disk,if=virtio,format=raw,cache=unsafe" \
    -kernel "$kernel" -initrd "$work/initrd" \
    -append "console=ttyS0 cgroup_no_v1=all quiet panic=-1 rdinit=/init" </dev/null &
pids+=($!)
wait "${pids[2]}" || true
[ -e "$out/guest.rc" ] || { echo "hostroot.sh: the guest ended without a result (see the console above)" >&2; exit 1; }
exit "$(cat "$out/guest.rc")"
