#!/bin/bash
# usage: i18b-haltstack.sh BINDIR N OUT : N zones running, then halt a probe zone 5
# times while sampling its init's kernel stack (/proc/<pid>/stack) until it is gone.
W=$1/warren; N=$2; OUT=$3
R=$(mktemp -d /tmp/i18b-hs.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=$R/run
trap '$W halt --all >/dev/null 2>&1; for z in $(ls $R/zones 2>/dev/null | grep -v "^\\."); do $W delete --force $z >/dev/null 2>&1; done; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
$W template create host --from host >/dev/null; $W create base >/dev/null; $W install base >/dev/null
$W clone base $(seq -f "h%g" 1 $N) probe >/dev/null; $W boot $(seq -f "h%g" 1 $N) >/dev/null
echo "# N=$N $(uptime)" >> $OUT
for k in 1 2 3 4 5; do
  $W boot probe >/dev/null
  pid=$(python3 -c "import json;print(json.load(open('$R/zones/probe/runtime.json'))['init']['pid'])")
  s=$(date +%s%N); $W halt probe >/dev/null & hp=$!
  while [ -e /proc/$pid/stack ]; do
    st=$(cat /proc/$pid/stack 2>/dev/null | head -6 | awk '{print $2}' | tr '\n' ' ')
    [ -n "$st" ] && echo "$(( ($(date +%s%N) - s) / 1000000 )) ms: $st" >> $OUT
  done
  wait $hp; echo "# halt $k: $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $OUT
done
