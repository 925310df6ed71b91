#!/bin/busybox sh
# Guest PID 1, stage two: mount what a Debian host has (cgroup2 only, as with
# systemd on a kernel booted with cgroup_no_v1=all), load the modules, lay out the
# cgroups the way systemd does for a `Delegate=yes` service (controllers enabled in
# the root's subtree_control, the service's own cgroup holding more than one process),
# run /scenario.sh from inside that cgroup, print its result lines, power off.
/bin/busybox --install -s /bin
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mdev -s
mkdir -p /dev/pts /dev/shm /sys/fs/cgroup
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null || ifconfig lo up
hostname warren-vm
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null || echo "WARREN-VM-NOTE insmod $m failed"; done < /lib/modules/load
echo "WARREN-VM-KERNEL $(uname -r)"
# The state root on ext4 (boot.sh's disk), as /var/lib on a Debian host.
mkdir -p /var/lib/warren
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.2; done
mount -t ext4 /dev/vda /var/lib/warren || echo "WARREN-VM-NOTE no ext4 disk: the state root is on tmpfs"
# What systemd does for every unit on a v2 host: enable the controllers below the root.
for c in cpuset cpu io memory pids; do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; done
# A service with Delegate=yes: its own cgroup, holding the service's processes.
svc=/sys/fs/cgroup/warren.service
mkdir -p $svc
sleep 100000 &
echo $! > $svc/cgroup.procs
export WARREN_VM_SERVICE=$svc WARREN_VM_SLEEPER=$!
sh -c "echo \$\$ > $svc/cgroup.procs && exec sh /scenario.sh" 2>&1
echo "WARREN-VM-DONE"
sync
poweroff -f
