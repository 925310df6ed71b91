#!/bin/bash
# A B A B: main's shim (before) and this branch's (after), 20 pods, warren-shim, overlayfs
R=/work/s10-i20/target/x86_64-unknown-linux-gnu/release
O=/tmp/s10-i20-ab; mkdir -p $O
for k in before-1 after-1 before-2 after-2; do
  v=${k%-*}
  { date -u; uptime; } > $O/$k.uptime
  WARREN_SHIM_BINARY=/tmp/s10-i20-bin/$v/containerd-shim-warren-v1 $R/warren bench cri --pods 20 --handlers warren-shim --snapshotter overlayfs --out $O/$k > $O/$k.stdout 2> $O/$k.stderr
  echo "rc=$?" >> $O/$k.uptime
  { date -u; uptime; } >> $O/$k.uptime
done
