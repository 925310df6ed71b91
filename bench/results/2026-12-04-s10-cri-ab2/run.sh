#!/bin/bash
R=/work/s10-i20/target/x86_64-unknown-linux-gnu/release
O=/tmp/s10-i20-ab2; mkdir -p $O
for k in before-3 after-3 before-4 after-4 handlers; do
  v=${k%-*}; h=warren-shim; [ $k = handlers ] && { v=after; h=runc,warren,warren-shim; }
  { date -u; uptime; } > $O/$k.uptime
  WARREN_SHIM_BINARY=/tmp/s10-i20-bin/$v/containerd-shim-warren-v1 $R/warren bench cri --pods 20 --handlers $h --snapshotter overlayfs --out $O/$k > $O/$k.stdout 2> $O/$k.stderr
  echo "rc=$?" >> $O/$k.uptime
  { date -u; uptime; } >> $O/$k.uptime
done
