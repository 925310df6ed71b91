#!/bin/busybox sh
# hostroot.sh's guest, stage one (the initramfs): load the modules, lay the host's root
# (virtiofs, read-only) under an overlay with a tmpfs on top, mount /tmp's disk and the
# output share, and switch to the host's tree, where hostroot-stage2.sh goes on.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null || echo "WARREN-VM-NOTE insmod $m failed"; done < /lib/modules/load
mount -t virtiofs -o ro hostroot /lower || { echo "WARREN-VM-NOTE no host root"; poweroff -f; }
mount -t tmpfs -o mode=755 upper /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w root /newroot
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.2; done
mount -t ext4 /dev/vda /newroot/tmp
chmod 1777 /newroot/tmp
{ read -r stage2; read -r out; } < /stage2.args
mkdir -p "/newroot$out"
mount -t virtiofs out "/newroot$out"
umount /proc /sys /dev
exec switch_root /newroot /bin/bash "$stage2" "$out"
