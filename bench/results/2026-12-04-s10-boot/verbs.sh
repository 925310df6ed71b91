#!/bin/bash
# usage: verbs.sh BINDIR N OUT -- the CLI verbs at N zones (issue 18, session 10), wall
# to wall: clone of N-1 zones from one installed `host` zone, `boot --all`, strace -c of
# one single boot with the others running, 100 single halts and boots one at a time,
# `sync` (timed: the boot storm's dirty data), 100 more single halts and boots,
# `halt --all`, delete. PERF=1 adds a 10 s system-wide profile during boot --all. A temporary state root, removed at the end (also on failure).
set -u
W=$1/warren; N=$2; O=$3; mkdir -p $O
R=$(mktemp -d /tmp/s10v.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s10v
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
uptime > $O/uptime; cat /proc/meminfo > $O/meminfo.start
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
echo "clone $((N-1)): $(t $W clone z0 $names)" | tee -a $O/verbs.txt
# PERF=1: sample the whole host for 10 s from 20 s into boot --all (perturbs its time; the data stays in /tmp, its report is kept).
[ -n "${PERF:-}" ] && (sleep 20; perf record -a -g -F 499 -o /tmp/s10-perf.boot.data -- sleep 10 > /dev/null 2>&1) &
echo "boot --all: $(t $W boot --all)" | tee -a $O/verbs.txt
wait
cat /proc/meminfo > $O/meminfo.peak; uptime >> $O/uptime
$W halt z1 > /dev/null
strace -c -f -b execve -o $O/strace-c.boot $W boot z1 > /dev/null 2>&1
strace -f -b execve -e trace=getdents64 -o $O/strace-getdents.boot $W halt z1 > /dev/null 2>&1
strace -f -b execve -e trace=getdents64 -o $O/strace-getdents.boot $W boot z1 > /dev/null 2>&1
single() { # label count
    for i in $(seq 1 $2); do z=z$((i * (N / $2) - 2)); echo "$1-halt $z $(t $W halt $z)"; done >> $O/single.txt
    for i in $(seq 1 $2); do z=z$((i * (N / $2) - 2)); echo "$1-boot $z $(t $W boot $z)"; done >> $O/single.txt
}
single first 100
echo "sync: $(t sync)" | tee -a $O/verbs.txt
single synced 100
echo "halt --all: $(t $W halt --all)" | tee -a $O/verbs.txt
echo "delete: $(t $W delete --force $names z0)" | tee -a $O/verbs.txt
uptime >> $O/uptime; cat /proc/meminfo > $O/meminfo.end
for k in first-halt first-boot synced-halt synced-boot; do awk -v k=$k '$1==k{print $3}' $O/single.txt | sort -n | awk -v k=$k '{a[NR]=$1} END{printf "%s n=%d median=%.1f ms p99=%.1f ms max=%.1f ms\n", k, NR, a[int(NR/2)+1]*1000, a[int(NR*0.99)]*1000, a[NR]*1000}'; done | tee -a $O/verbs.txt
