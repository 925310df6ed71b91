#!/bin/bash
# The machine was loaded (other engineers' builds): the 10,000-zone run first (the only
# one past this boot's shrinker high-water mark, ~18,000 superblocks from the previous
# session's runs), then the smaller ones as time allows.
D=$(dirname $0); NEW=/tmp/i18a-new; OLD=/tmp/i18a-old
while [ ! -e /tmp/i18am/new1000/free.after ]; do sleep 2; done
echo "$(date -u +%T) done new 1000: $(tail -3 /tmp/i18am/new1000/demo.txt | head -1)"
for step in "new 10000" "old 1000" "new 3000" "old 3000"; do
  set -- $step; bin=$NEW; [ $1 = old ] && bin=$OLD
  echo "$(date -u +%T) start $1 $2 (free: $(free -g | awk '/Mem/{print $7}') GiB available)"; $D/run.sh $bin $2 $1$2; echo "$(date -u +%T) done $1 $2: $(tail -3 /tmp/i18am/$1$2/demo.txt | head -1)"
done
