#!/usr/bin/env bash
# warren's shim one per pod against one per node (and runc), same run, overlayfs, two rounds.
set -u
OUT=${OUT:?}
mkdir -p "$OUT"
W=/work/notes/s13/bin/warren
root=$(mktemp -d /tmp/node-root.XXXX)
for round in 1 2; do
  echo "round $round start $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
  WARREN_SHIM_BINARY=/work/notes/s13/bin/containerd-shim-warren-v1 WARREN_ROOT=$root \
    $W bench cri --pods 10,50 --handlers runc,warren-shim,warren-shim-node --snapshotter overlayfs \
    --oci-root $root/oci --out "$OUT/r$round" > "$OUT/r$round.log" 2>&1
  echo "rc=$? end $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
done
rm -rf "$root"
