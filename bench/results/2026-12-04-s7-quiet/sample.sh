#!/bin/bash
# usage: sample.sh OUTDIR ROOT -- every 2 s: the number of running zones of state root
# ROOT (directories in its memory cgroup group), /proc/meminfo, and every 5th time
# /proc/slabinfo, until OUTDIR/stop exists; one of ROOT's zones' mountinfo is kept.
out=$1; root=$2; mkdir -p $out; i=0
CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
G=$CG/$(python3 -c 'import sys
h=0xcbf29ce484222325
for b in sys.argv[1].encode(): h=((h^b)*0x100000001b3)&0xffffffffffffffff
print("warren-%08x"%(h&0xffffffff))' "$root")
echo "$G" > $out/group
while [ ! -e $out/stop ]; do
  n=$(find $G -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)
  if [ ! -s $out/mountinfo.zone ] && [ $n -gt 0 ]; then
    for z in $G/*/; do p=$(head -1 $z/cgroup.procs 2>/dev/null); [ -n "$p" ] && cat /proc/$p/mountinfo > $out/mountinfo.zone 2>/dev/null && break; done
  fi
  echo "$i $(date +%s.%N) $n $(awk '/^(MemAvailable|Slab|SReclaimable|SUnreclaim|PageTables|Percpu|KernelStack|Shmem|AnonPages):/{printf "%s=%s ",$1,$2}' /proc/meminfo)" >> $out/series
  [ $((i % 5)) = 0 ] && cp /proc/slabinfo $out/slab.$i 2>/dev/null
  i=$((i+1)); sleep 2
done
