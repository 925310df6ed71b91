#!/bin/bash
# usage: halt-probe.sh MODE BINDIR N OUT -- N zones of the `host` template: clone,
# boot --all, then halt --all observed by MODE, delete; a temporary state root,
# removed at the end (also on failure).
#   cpu:    perf record -a -g -F 499 for the whole halt --all, `--json` output kept
#           (profile-halt-10000-old.txt)
#   offcpu: perf record -e sched:sched_switch -a -g for the whole halt --all
#           (offcpu-halt-3000.txt)
#   trace:  perf trace --duration ${D:-20} of warren and its workers: the system calls
#           longer than D ms (trace-summary.txt)
set -u
MODE=$1; W=$2/warren; N=$3; O=$4; mkdir -p $O
R=$(mktemp -d /tmp/s16h.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s16h
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
t(){ local a=$(date +%s.%N); "$@" 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc" >&2; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
names=$(seq -f 'z%g' 1 $((N-1)))
{ echo -n "clone: "; t $W clone z0 $names > /dev/null; } 2>> $O/verbs.txt
{ echo -n "boot --all: "; t $W boot --all > /dev/null; } 2>> $O/verbs.txt
sleep 15
case $MODE in
cpu|offcpu)
    if [ $MODE = cpu ]; then ev="-g -F 499"; else ev="-e sched:sched_switch -g"; fi
    perf record -a $ev -o $O/$MODE.data -- sleep 1000 > /dev/null 2>&1 &
    P=$!
    sleep 1
    { echo -n "halt --all: "; t $W halt --all --json > $O/halt.json; } 2>> $O/verbs.txt
    kill -INT $P; wait $P ;;
trace)
    { echo -n "halt --all (perf trace): "; t perf trace --duration ${D:-20} -o $O/trace.txt -- $W halt --all > /dev/null; } 2>> $O/verbs.txt ;;
esac
{ echo -n "delete: "; t $W delete --force $names z0 > /dev/null; } 2>> $O/verbs.txt
