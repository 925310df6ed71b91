#!/bin/bash
# usage: i18-sample.sh OUTDIR  -- samples every 0.5s until OUTDIR/stop exists
out=$1; mkdir -p $out; i=0
while [ ! -e $out/stop ]; do
  n=0; for c in /proc/[0-9]*/comm; do read -r x < $c 2>/dev/null && [ "$x" = warren-init ] && n=$((n+1)); done
  echo "$i $(date +%s.%N) $n $(awk '/^(MemAvailable|Slab|SReclaimable|SUnreclaim|PageTables|Percpu|KernelStack|Shmem|AnonPages):/{printf "%s=%s ",$1,$2}' /proc/meminfo)" >> $out/series
  cp /proc/slabinfo $out/slab.$i 2>/dev/null
  i=$((i+1)); sleep 0.5
done
