#!/bin/bash
# hostroot.sh's guest, stage two, PID 1 on the host's tree: mount what a Debian host
# has (cgroup2 only), put the command in a delegated service's cgroup (as
# guest-stage2.sh does), run OUT/guest.command, keep its status, power off.
out=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
ip link set lo up
hostname warren-hostroot
echo "WARREN-VM-KERNEL $(uname -r)"
for c in cpuset cpu io memory pids; do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control; done
svc=/sys/fs/cgroup/warren.service
mkdir -p $svc
sleep 100000 &
echo $! > $svc/cgroup.procs
bash -c "echo \$\$ > $svc/cgroup.procs && exec bash $out/guest.command" > >(tee "$out/guest.log") 2>&1
echo $? > "$out/guest.rc"
sleep 1
sync
/bin/busybox poweroff -f
