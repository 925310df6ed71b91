#!/bin/bash
# per-zone kernel memory, userns true vs false, 100 zones, alternating rounds
W=/tmp/uxp/new-bin/warren
k() { awk '/^(SUnreclaim|KernelStack|PageTables|Percpu|AnonPages|Shmem):/{s+=$2} END{print s}' /proc/meminfo; }
ku() { awk '/^(SUnreclaim|KernelStack|PageTables|Percpu):/{s+=$2} END{print s}' /proc/meminfo; }
for round in 1 2 3; do for mode in true false; do
  R=$(mktemp -d /tmp/uxp/mem.XXXX); export WARREN_ROOT=$R
  $W template create host --from host >/dev/null
  $W create z0 --set userns=$mode >/dev/null; $W install z0 >/dev/null
  for i in $(seq 1 99); do $W clone z0 z$i >/dev/null; done
  sync; sleep 1; a=$(k); b=$(ku)
  t0=$(date +%s%N)
  for i in $(seq 0 99); do $W boot z$i >/dev/null; done
  t1=$(date +%s%N)
  sleep 3; c=$(k); d=$(ku)
  echo "round $round userns=$mode: demo-formula $(( (c-a)/100 )) KiB/zone, kernel-only $(( (d-b)/100 )) KiB/zone, 100 boots $(( (t1-t0)/1000000 )) ms (incl. process start)"
  $W halt --all >/dev/null
  for i in $(seq 0 99); do $W delete --force z$i >/dev/null; done
  rm -rf $R
done; done
