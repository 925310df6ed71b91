#!/bin/bash
# Quiet machine (session 7): 100 zones, then 10,000, then 100 again, main's release build.
D=$(dirname $0); B=${1:-/work/main/target/x86_64-unknown-linux-gnu/release}
for step in "100 a100" "10000 a10000" "100 b100"; do
  set -- $step
  echo "$(date -u +%T) start $1 ($(cat /proc/loadavg))"; $D/run.sh $B $1 $2; echo "$(date -u +%T) done $1: $(tail -3 /tmp/s7q/$2/demo.txt | head -1)"
done
