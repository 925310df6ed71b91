#!/bin/bash
# usage: halt-tail.sh BINDIR N OUT -- is a single halt's tail at N zones the previous
# halt's memory cgroup going offline (css_killed_work_fn holds cgroup_mutex while
# memcg_reparent_list_lrus walks every list_lru on the host)? N zones booted, then
# single halts: A back to back, B each 3 s after the previous one (its offline done),
# C back to back under strace -T (each rmdir's and mkdir's time), then halt --all,
# delete. A temporary state root, removed at the end (also on failure).
set -u
W=$1/warren; N=$2; O=$3; mkdir -p $O
R=$(mktemp -d /tmp/s11h.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s11h
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
uptime > $O/uptime
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
echo "clone $((N-1)): $(t $W clone z0 $names)" | tee -a $O/verbs.txt
echo "boot --all: $(t $W boot --all)" | tee -a $O/verbs.txt
uptime >> $O/uptime
sleep 20  # let boot --all's tail settle
for i in $(seq 1 40); do z=z$((i * 97)); echo "A-halt $z $(t $W halt $z)"; done >> $O/single.txt
sleep 10
for i in $(seq 1 40); do z=z$((i * 97 + 1)); sleep 3; echo "B-halt $z $(t $W halt $z)"; done >> $O/single.txt
sleep 10
for i in $(seq 1 20); do z=z$((i * 97 + 2)); echo "C-halt $z $(t strace -f -T -e trace=rmdir,mkdir -o $O/strace.$z $W halt $z)"; done >> $O/single.txt
uptime >> $O/uptime
echo "halt --all: $(t $W halt --all)" | tee -a $O/verbs.txt
echo "delete: $(t $W delete --force $names z0)" | tee -a $O/verbs.txt
uptime >> $O/uptime
for k in A-halt B-halt C-halt; do awk -v k=$k '$1==k{print $3}' $O/single.txt | sort -n | awk -v k=$k '{a[NR]=$1} END{printf "%s n=%d median=%.1f ms p90=%.1f ms max=%.1f ms\n", k, NR, a[int(NR/2)+1]*1000, a[int(NR*0.9)]*1000, a[NR]*1000}'; done | tee -a $O/verbs.txt
for f in $O/strace.*; do awk -F'<' '/rmdir/{gsub(">","",$NF); if ($NF+0>m) m=$NF+0} END{printf "%s max rmdir %.1f ms\n", FILENAME, m*1000}' $f; done | tee -a $O/verbs.txt
