#!/usr/bin/env bash
# Session 16: `warren bench density --zones 10,100 --compare crun,crun-nocgroups
# --template busybox` in a freshly booted Debian 12 kernel (6.1, cgroup v2 only) with
# this host's userland (scripts/vm/hostroot.sh, QEMU TCG, 8 GiB): crun with its cgroups
# on a v2 host (the bench's cgroup jail beneath the delegated base), against warren and
# crun without cgroups, with the shrinker state at its floor. Timings under TCG say
# nothing. Release builds in $BIN; results in $OUT/guest/run.
set -u
BIN=${BIN:?the release build directory}
OUT=${OUT:?the results directory}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
kdir=$("$repo/scripts/vm/fetch-kernel.sh" debian12 | tail -1)
mkdir -p "$OUT/guest"
echo "start $(date -u +%TZ) host load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.log"
WARREN_VM_MEM=8192 WARREN_VM_DISK=16 "$repo/scripts/vm/hostroot.sh" "$kdir" "$OUT/guest" \
    bash -c "root=\$(mktemp -d /tmp/density.XXXX); WARREN_ROOT=\$root $BIN/warren bench density --zones 10,100 --compare crun,crun-nocgroups --template busybox --out $OUT/guest/run" \
    > "$OUT/console.log" 2>&1
echo "rc=$? end $(date -u +%TZ) host load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.log"
