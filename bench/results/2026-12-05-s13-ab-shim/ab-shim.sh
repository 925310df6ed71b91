#!/usr/bin/env bash
# A/B of the warren shim: session 12's (sync ttrpc, a thread pool per connection) and
# this session's (one-thread async server), same warren, interleaved, overlayfs.
set -u
OUT=${OUT:?}
mkdir -p "$OUT"
W=/work/notes/s13/bin/warren
root=$(mktemp -d /tmp/ab-shim-root.XXXX)
for round in ${ROUNDS:-1 2}; do
  for v in s12 s13; do
    echo "round $round $v start $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
    WARREN_SHIM_BINARY=/work/notes/$v/bin/containerd-shim-warren-v1 WARREN_ROOT=$root \
      $W bench cri --pods 10,50 --handlers warren-shim --snapshotter overlayfs \
      --oci-root $root/oci --out "$OUT/r$round-$v" > "$OUT/r$round-$v.log" 2>&1
    echo "rc=$? end $(date -u +%TZ) $(cat /proc/loadavg)" >> "$OUT/runs.log"
  done
done
rm -rf "$root"
