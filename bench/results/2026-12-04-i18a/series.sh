#!/bin/bash
# The interleaved series: the binary with fewer superblocks first at each N (the
# shrinker high-water mark never falls: docs/scaling.md).
D=$(dirname $0); NEW=/tmp/i18a-new; OLD=/tmp/i18a-old
for step in "new 100" "old 100" "new 1000" "old 1000" "new 3000" "old 3000" "new 10000"; do
  set -- $step; bin=$NEW; [ $1 = old ] && bin=$OLD
  echo "$(date -u +%T) start $1 $2"; $D/run.sh $bin $2 $1$2; echo "$(date -u +%T) done $1 $2: $(tail -3 /tmp/i18am/$1$2/demo.txt | head -1)"
done
