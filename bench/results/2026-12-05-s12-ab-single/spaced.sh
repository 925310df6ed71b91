#!/bin/bash
# usage: spaced.sh BINDIR N OUT -- N single `warren boot Z`, 300 ms apart, alternating
# WARREN_CGROUP_SELF_JOIN on/off; the "booted in" figure each prints. Temporary root.
set -u
W=$1/warren; N=$2; O=$3; mkdir -p $O
R=$(mktemp -d /tmp/s12s.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s12s
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
echo "start $(date -u +%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/spaced.txt
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
$W clone z0 $(seq -f 'z%g' 1 $N) > /dev/null
for i in $(seq 1 $N); do
  sleep 0.3
  if [ $((i % 2)) = 1 ]; then m=self-join; out=$($W boot z$i 2>&1); else m=off; out=$(WARREN_CGROUP_SELF_JOIN=off $W boot z$i 2>&1); fi
  echo "$m $out" >> $O/spaced.txt
done
echo "end $(date -u +%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/spaced.txt
for m in self-join off; do grep "^$m " $O/spaced.txt | sed -E 's/.* in ([0-9.]+) ms.*/\1/' | sort -n | awk -v m=$m '{a[NR]=$1} END{printf "%s n=%d median=%.1f ms min=%.1f max=%.1f\n", m, NR, a[int((NR+1)/2)], a[1], a[NR]}'; done | tee -a $O/spaced.txt
