#!/bin/bash
# usage: inits.sh BIN_DIR N TAG — boot N zones with BIN_DIR/warren (+ its warren-init),
# print the averages of their inits' memory, then halt and delete them. (From
# bench/results/2026-12-04-i18c/inits.sh, paths under /tmp/s15-init.)
set -e
B=$1; N=$2; TAG=$3
R=/tmp/s15-init/root-$TAG; export WARREN_RUN_DIR=/tmp/s15-init/run-$TAG; mkdir -p $WARREN_RUN_DIR
W=$B/warren
uptime
$W --root $R template create host --from host >/dev/null 2>&1 || true
$W --root $R create base >/dev/null; $W --root $R install base >/dev/null
for i in $(seq 1 $N); do $W --root $R clone base z$i >/dev/null; done
sleep 1
slab0=$(awk '$1=="kernfs_node_cache"{print $2*$4}' /proc/slabinfo)
m0=$(grep -E "^(Slab|SUnreclaim|PageTables|AnonPages):" /proc/meminfo | awk '{print $2}' | paste -sd' ')
for i in $(seq 1 $N); do $W --root $R boot z$i >/dev/null; done
sleep 2
slab1=$(awk '$1=="kernfs_node_cache"{print $2*$4}' /proc/slabinfo)
m1=$(grep -E "^(Slab|SUnreclaim|PageTables|AnonPages):" /proc/meminfo | awk '{print $2}' | paste -sd' ')
pids=$($W --root $R list -v | awk 'NR>1 && $2=="running"{print $6}')
python3 - "$N" "$slab0" "$slab1" "$m0" "$m1" $pids <<'PY'
import sys
n=int(sys.argv[1]); s0,s1=int(sys.argv[2]),int(sys.argv[3])
m0=list(map(int,sys.argv[4].split())); m1=list(map(int,sys.argv[5].split()))
pids=sys.argv[6:]
tot={}
for p in pids:
    for l in open(f"/proc/{p}/smaps_rollup"):
        k,_,v=l.partition(':')
        if v.strip().endswith('kB'): tot[k]=tot.get(k,0)+int(v.split()[0])
    for l in open(f"/proc/{p}/status"):
        if l.startswith("VmPTE"): tot["VmPTE"]=tot.get("VmPTE",0)+int(l.split()[1])
k=len(pids)
print(f"inits={k}", " ".join(f"{x}={tot[x]/k:.1f}" for x in ["Rss","Pss","Pss_Anon","Pss_File","Anonymous","VmPTE"]), "KiB per init")
print("meminfo per zone KiB [AnonPages Slab SUnreclaim PageTables]:", [round((b-a)/n,1) for a,b in zip(m0,m1)])
print(f"kernfs_node_cache per zone: {(s1-s0)/n/1024:.1f} KiB (active objs x size)")
PY
$W --root $R halt --all >/dev/null
for i in $(seq 1 $N); do $W --root $R delete --force z$i >/dev/null; done
$W --root $R delete --force base >/dev/null; $W --root $R template delete host >/dev/null 2>&1 || true
uptime
