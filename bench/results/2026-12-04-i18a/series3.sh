#!/bin/bash
# After the 10,000-zone run: 1,000 zones, new then old, with the sampler that counts
# only this run's zones (the first 100/1,000 runs counted every warren-init on the host,
# other engineers' zones included: kept as x-*-all-inits, not used for per-zone figures).
D=$(dirname $0); NEW=/tmp/i18a-new; OLD=/tmp/i18a-old
while [ ! -e /tmp/i18am/new10000/free.after ]; do sleep 2; done
echo "$(date -u +%T) done new 10000: $(tail -3 /tmp/i18am/new10000/demo.txt | head -1)"
for step in "new 1000" "old 1000" "new 100" "old 100"; do
  set -- $step; bin=$NEW; [ $1 = old ] && bin=$OLD
  echo "$(date -u +%T) start $1 $2 (free: $(free -g | awk '/Mem/{print $7}') GiB available)"; $D/run.sh $bin $2 $1$2; echo "$(date -u +%T) done $1 $2: $(tail -3 /tmp/i18am/$1$2/demo.txt | head -1)"
done
