#!/bin/bash
# probe: N empty memcgs under own cgroup; kmalloc-1k objects they add
N=${1:-50}
CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
cleanup(){ for i in $(seq $N); do rmdir $CG/s10i20p$i 2>/dev/null; done; }
trap cleanup EXIT
grep -E "^kmalloc-1k |^# name" /proc/slabinfo
a=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo)
for i in $(seq $N); do mkdir $CG/s10i20p$i; done
b=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo)
cleanup
c=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo)
echo "cg=$CG before=$a with=$b after=$c per-memcg=$(( (b-a)/N ))"
