#!/bin/busybox sh
# Guest PID 1, stage one: the initramfs is the kernel's rootfs, where pivot_root (which
# every zone boot does inside its own mount namespace) is refused. Copy it into a
# tmpfs and switch_root there; /stage2 does the rest.
/bin/busybox mkdir -p /proc /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t tmpfs -o size=70%,mode=755 root /newroot
for d in /*; do
    case "$d" in /proc|/newroot) ;; *) /bin/busybox cp -a "$d" /newroot/ ;; esac
done
/bin/busybox mkdir -p /newroot/proc
/bin/busybox umount /proc
exec /bin/busybox switch_root /newroot /stage2
