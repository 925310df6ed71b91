#!/bin/bash
# boot --all / halt --all of N zones, wall to wall (issue 18), release build in $1.
set -u
W=$1/warren; N=$2; O=$3; mkdir -p $O
R=$(mktemp -d /tmp/s16a.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s16a
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
uptime > $O/uptime
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
echo "clone $((N-1)): $(t $W clone z0 $names)" | tee -a $O/verbs.txt
uptime >> $O/uptime
echo "boot --all: $(t $W boot --all)" | tee -a $O/verbs.txt
uptime >> $O/uptime
sleep 20
echo "halt --all: $(t $W halt --all)" | tee -a $O/verbs.txt
echo "delete: $(t $W delete --force $names z0)" | tee -a $O/verbs.txt
uptime >> $O/uptime
