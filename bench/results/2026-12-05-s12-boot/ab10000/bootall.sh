#!/bin/bash
# usage: bootall.sh BINDIR N OUT LABEL -- clone N-1 zones from one installed host zone, boot --all, halt --all, delete; wall times.
set -u
W=$1/warren; N=$2; O=$3; L=$4; mkdir -p $O
R=$(mktemp -d /tmp/s12b.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s12b
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
echo "$L start $(date -u +%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) WARREN_CGROUP_SELF_JOIN=${WARREN_CGROUP_SELF_JOIN:-}" | tee -a $O/runs.txt
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
echo "$L clone $((N-1)): $(t $W clone z0 $names)" | tee -a $O/runs.txt
echo "$L boot --all: $(t $W boot --all)" | tee -a $O/runs.txt
echo "$L halt --all: $(t $W halt --all)" | tee -a $O/runs.txt
echo "$L delete: $(t $W delete --force $names z0)" | tee -a $O/runs.txt
echo "$L end $(date -u +%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $O/runs.txt
