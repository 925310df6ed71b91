#!/usr/bin/env bash
# Session 15: `warren bench density --zones 10,100 --compare crun,lxc --template busybox`
# in a freshly booted Debian 12 kernel (6.1, cgroup v2 only) with this host's userland
# (scripts/vm/hostroot.sh, QEMU TCG, 8 GiB): memory figures from a kernel whose
# shrinker state is at its floor, with this session's warren-init. Timings under TCG
# say nothing. Release builds in $BIN; results in $OUT/guest/run.
set -u
BIN=${BIN:?the release build directory}
OUT=${OUT:?the results directory}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
kdir=$("$repo/scripts/vm/fetch-kernel.sh" debian12 | tail -1)
mkdir -p "$OUT/guest"
echo "start $(date -u +%TZ) host load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.log"
WARREN_VM_MEM=8192 WARREN_VM_DISK=16 "$repo/scripts/vm/hostroot.sh" "$kdir" "$OUT/guest" \
    bash -c "root=\$(mktemp -d /tmp/density.XXXX); WARREN_ROOT=\$root $BIN/warren bench density --zones 10,100 --compare crun,lxc --template busybox --out $OUT/guest/run" \
    > "$OUT/console.log" 2>&1
echo "rc=$? end $(date -u +%TZ) host load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.log"
