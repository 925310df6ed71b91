#!/usr/bin/env bash
# The final tree's shim, per pod and per node, one round, overlayfs.
set -u
OUT=${OUT:?}
mkdir -p "$OUT"
root=$(mktemp -d /tmp/final-root.XXXX)
echo "start $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
WARREN_SHIM_BINARY=/work/notes/s13/bin/containerd-shim-warren-v1 WARREN_ROOT=$root \
  /work/notes/s13/bin/warren bench cri --pods 10,50 --handlers warren-shim,warren-shim-node \
  --snapshotter overlayfs --oci-root $root/oci --out "$OUT/run" > "$OUT/run.log" 2>&1
echo "rc=$? end $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
rm -rf "$root"
