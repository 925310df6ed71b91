#!/bin/bash
# usage: verbs.sh BINDIR N NAME -- the CLI verbs at N zones, timed wall to wall: clone of N
# zones from one installed zone (pipelined), `boot --all`, 200 single halts and boots one
# at a time with N-1 others running (each a whole `warren halt`/`warren boot` process),
# `halt --all`, delete. PERF=1 adds a 10 s system-wide perf profile during boot --all. A temporary state root, removed at the end; /proc/meminfo sampled.
W=$1/warren; N=$2; O=/tmp/s7q/$3; rm -rf $O; mkdir -p $O
R=$(mktemp -d /tmp/s7v.XXXX); export WARREN_ROOT=$R
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
uptime > $O/uptime; cat /proc/meminfo > $O/meminfo.start
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
echo "clone $((N-1)): $(t $W clone z0 $names)" | tee -a $O/verbs.txt
# PERF=1: sample the whole host for 10 s from 5 s into boot --all (perturbs its time).
[ -n "$PERF" ] && (sleep 5; perf record -a -g -o $O/perf.boot.data -- sleep 10 > /dev/null 2>&1) &
echo "boot --all: $(t $W boot --all)" | tee -a $O/verbs.txt
wait
cat /proc/meminfo > $O/meminfo.peak
for i in $(seq 1 200); do z=z$((i * (N / 200) - 1)); echo "halt1 $z $(t $W halt $z)"; done >> $O/single.txt
for i in $(seq 1 200); do z=z$((i * (N / 200) - 1)); echo "boot1 $z $(t $W boot $z)"; done >> $O/single.txt
echo "halt --all: $(t $W halt --all)" | tee -a $O/verbs.txt
echo "delete: $(t $W delete --force $names z0)" | tee -a $O/verbs.txt
uptime >> $O/uptime; cat /proc/meminfo > $O/meminfo.end
for k in halt1 boot1; do awk -v k=$k '$1==k{print $3}' $O/single.txt | sort -n | awk -v k=$k '{a[NR]=$1} END{printf "%s n=%d median=%.1f ms p99=%.1f ms max=%.1f ms\n", k, NR, a[int(NR/2)+1]*1000, a[int(NR*0.99)]*1000, a[NR]*1000}'; done | tee -a $O/verbs.txt
