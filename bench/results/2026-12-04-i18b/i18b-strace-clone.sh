#!/bin/bash
# usage: i18b-strace-clone.sh BEFORE_BINDIR AFTER_BINDIR OUT : strace -c -f -b execve of
# one clone by each binary (main's tip 52cdd11 before, branch i18b after; debug builds:
# the counts do not depend on optimisation) with 100, then 300 zones running.
B=$1/warren; A=$2/warren; OUT=$3; mkdir -p $OUT
R=$(mktemp -d /tmp/i18b-sc.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=$R/run
trap '$A halt --all >/dev/null 2>&1; for z in $(ls $R/zones 2>/dev/null | grep -v "^\\."); do $A delete --force $z >/dev/null 2>&1; done; $A template delete host >/dev/null 2>&1; rm -rf $R' EXIT
$A template create host --from host >/dev/null; $A create base >/dev/null; $A install base >/dev/null
for n in 100 300; do
  from=$(( n == 100 ? 1 : 101 ))
  $A clone base $(seq -f "s%g" $from $n) >/dev/null; $A boot $(seq -f "s%g" $from $n) --watch 0 >/dev/null
  echo "# running=$(ls $R/run/userns | grep -c '^[0-9]') $(uptime)" >> $OUT/strace-clone.uptime
  strace -c -f -b execve -o $OUT/strace-clone$n.before $B clone base pb$n >/dev/null
  strace -c -f -b execve -o $OUT/strace-clone$n.after $A clone base pa$n >/dev/null
done
