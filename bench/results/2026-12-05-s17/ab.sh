#!/bin/bash
# A/B of boot: A = $1 (bin dir), B = $2; N zones of the host template; boot --all and
# halt --all alternated A B A B; wall and CPU (user+sys) of boot --all.
set -u
A=$1; B=$2; N=$3; O=$4; mkdir -p $O
R=$(mktemp -d /tmp/s17ab.XXXX); export WARREN_ROOT=$R
trap '$A/warren halt --all >/dev/null 2>&1; $A/warren delete --force $($A/warren list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $A/warren template delete host >/dev/null 2>&1; rm -rf $R' EXIT
$A/warren template create host --from host > /dev/null
$A/warren create z0 --template host > /dev/null
$A/warren install z0 > /dev/null
$A/warren clone z0 $(seq -f 'z%g' 1 $((N-1))) > /dev/null
for round in 1 2; do
  for v in A B; do
    bin=${!v}
    sleep 5
    /usr/bin/time -f "$v boot --all: %e s wall, %U user %S sys" $bin/warren boot --all > /dev/null 2>> $O/ab.txt
    sleep 5
    /usr/bin/time -f "$v halt --all: %e s wall, %U user %S sys" $bin/warren halt --all > /dev/null 2>> $O/ab.txt
  done
done
cat $O/ab.txt
