#!/bin/bash
# 3,000 zones, new then old (both below this boot's mark of ~40,000 superblocks by then).
D=$(dirname $0); NEW=/tmp/i18a-new; OLD=/tmp/i18a-old
for step in "new 3000" "old 3000"; do
  set -- $step; bin=$NEW; [ $1 = old ] && bin=$OLD
  echo "$(date -u +%T) start $1 $2 (free: $(free -g | awk '/Mem/{print $7}') GiB available)"; $D/run.sh $bin $2 $1$2; echo "$(date -u +%T) done $1 $2: $(tail -3 /tmp/i18am/$1$2/demo.txt | head -1)"
done
