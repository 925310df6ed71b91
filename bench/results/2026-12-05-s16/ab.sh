#!/bin/bash
# A/B of boot --all and halt --all at N zones in one state root: binaries A and B
# alternate (A B A B). $1 A bindir, $2 B bindir, $3 N, $4 out dir.
set -u
A=$1; B=$2; N=$3; O=$4; mkdir -p $O
R=$(mktemp -d /tmp/s16ab.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s16ab
W=$A/warren
trap '$W halt --all >/dev/null 2>&1; $W delete --force $($W list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
t(){ local a=$(date +%s.%N); "$@" > /dev/null 2>>$O/errors; local rc=$?; local b=$(date +%s.%N); echo "$(echo "$b - $a" | bc) rc=$rc"; }
$W template create host --from host > /dev/null
$W create z0 --template host > /dev/null
$W install z0 > /dev/null
echo "clone (A): $(t $W clone z0 $(seq -f 'z%g' 1 $((N-1))))" >> $O/ab.txt
for round in 1 2; do
  for x in A B; do
    d=${!x}
    sleep 10
    echo "$x boot --all: $(t $d/warren boot --all) load $(cut -d' ' -f1 /proc/loadavg)" >> $O/ab.txt
    sleep 10
    echo "$x halt --all: $(t $d/warren halt --all) load $(cut -d' ' -f1 /proc/loadavg)" >> $O/ab.txt
  done
done
echo "delete (A): $(t $W delete --force $(seq -f 'z%g' 0 $((N-1))))" >> $O/ab.txt
