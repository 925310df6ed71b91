#!/bin/bash
# After the id allocator's sweep (one sort instead of every candidate against every range,
# and a set instead of a search per zone): 10,000 then 100 zones, same sampling.
D=$(dirname $0); B=${1:-/work/main/target/x86_64-unknown-linux-gnu/release}
for step in "10000 c10000" "100 c100"; do
  set -- $step
  echo "$(date -u +%T) start $1 ($(cat /proc/loadavg))"; $D/run.sh $B $1 $2; echo "$(date -u +%T) done $1: $(tail -3 /tmp/s7q/$2/demo.txt | head -1)"
done
