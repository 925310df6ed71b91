#!/bin/bash
# demo --zones N alternated: bin dirs given as args (label=dir), each run in a fresh
# temporary state root, removed after; JSON and uptime per run in $OUT.
set -u
N=$1; OUT=$2; shift 2
mkdir -p $OUT
for spec in "$@"; do
  l=${spec%%=*}; b=${spec#*=}
  R=$(mktemp -d /tmp/s17demo.XXXX)
  sleep 20
  uptime > $OUT/demo-$N-$l.uptime
  WARREN_ROOT=$R $b/warren demo --zones $N --json > $OUT/demo-$N-$l.json 2> $OUT/demo-$N-$l.err
  uptime >> $OUT/demo-$N-$l.uptime
  rm -rf $R
  python3 -c "
import json;d=json.load(open('$OUT/demo-$N-$l.json'))
print('$l', *[(k, round(d[k]['median'],2), round(d[k]['p99'],2)) for k in ['clone_ms','boot_ms','halt_ms']], 'mem', round(d['mem_per_zone_mib'],3), 'total', round(d['total_s'],1))"
done
