#!/usr/bin/env bash
# Session 15: the first measurements on a freshly booted host (the dev VM, booted at
# 10:36 UTC; nothing of warren's ran on this boot before them), so the per-memory-
# cgroup shrinker state starts at its floor (docs/scaling.md, "The superlinear term"),
# for issues 20 and 18, in the order that keeps each run's figures clean of the later
# ones' superblocks: the CRI bench (10 and 50 pods), the 100-zone comparison, 100 zones
# in `warren demo`, 500 pods through the CRI, then 10,000 zones in `warren demo`.
# Release builds of 7878c2b in $BIN.
#   BIN=.../release OUT=dir bash fresh.sh
set -u
BIN=${BIN:?the release build directory}
OUT=${OUT:?the results directory}
mkdir -p "$OUT"
stamp() { echo "$1 $(date -u +%TZ) up $(cut -d' ' -f1 /proc/uptime)s load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.log"; }
# kmalloc-1k objects one empty memory cgroup adds on this boot now (the shrinker_info
# units: one per 64 shrinker ids ever allocated): 20 memcgs beneath our own, removed.
probe() {
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
    dir=/sys/fs/cgroup/memory${own%/}
    objs() { awk '$1 == "kmalloc-1k" {print $2}' /proc/slabinfo; }
    before=$(objs)
    for i in $(seq 20); do mkdir "$dir/fresh-probe-$$-$i"; done
    with=$(objs)
    for i in $(seq 20); do rmdir "$dir/fresh-probe-$$-$i"; done
    echo "probe $1: kmalloc-1k objects per empty memcg $(( (with - before) / 20 )) ($before -> $with for 20)" >> "$OUT/runs.log"
    sleep 2
}
probe start
root=$(mktemp -d /tmp/fresh-cri.XXXX)
stamp "cri start"
WARREN_ROOT=$root "$BIN/warren" bench cri --pods 10,50 \
    --handlers runc,warren-shim,warren-shim-node --snapshotter overlayfs \
    --oci-root "$root/oci" --out "$OUT/cri" > "$OUT/cri.log" 2>&1
stamp "cri rc=$? end"
rm -rf "$root"
probe after-cri
root=$(mktemp -d /tmp/fresh-density.XXXX)
stamp "density start"
WARREN_ROOT=$root "$BIN/warren" bench density --zones 10,100 --compare crun,lxc \
    --out "$OUT/density" > "$OUT/density.log" 2>&1
stamp "density rc=$? end"
rm -rf "$root"
probe after-density
root=$(mktemp -d /tmp/fresh-demo.XXXX)
stamp "demo 100 start"
WARREN_ROOT=$root "$BIN/warren" demo --zones 100 > "$OUT/demo-100.log" 2>&1
stamp "demo 100 rc=$? end"
rm -rf "$root"
probe after-demo-100
# 500 pods (issue 20's third target), both groupings, before the 10,000 zones raise
# the shrinker mark for good.
root=$(mktemp -d /tmp/fresh-cri.XXXX)
stamp "cri-500 start"
WARREN_ROOT=$root "$BIN/warren" bench cri --pods 500 --max-pods 500 \
    --handlers warren-shim,warren-shim-node --snapshotter overlayfs \
    --oci-root "$root/oci" --out "$OUT/cri-500" > "$OUT/cri-500.log" 2>&1
stamp "cri-500 rc=$? end"
rm -rf "$root"
probe after-cri-500
root=$(mktemp -d /tmp/fresh-demo.XXXX)
stamp "demo 10000 start"
WARREN_ROOT=$root "$BIN/warren" demo --zones 10000 > "$OUT/demo-10000.log" 2>&1
stamp "demo 10000 rc=$? end"
rm -rf "$root"
probe after-demo-10000
