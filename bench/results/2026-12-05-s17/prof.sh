#!/bin/bash
# perf record -a -g over boot --all of N zones with bin $1; report to $3
set -u
A=$1; N=$2; O=$3; mkdir -p $O
R=$(mktemp -d /tmp/s17pr.XXXX); export WARREN_ROOT=$R
trap '$A/warren halt --all >/dev/null 2>&1; $A/warren delete --force $($A/warren list --format csv -c name 2>/dev/null | tail -n +2) >/dev/null 2>&1; $A/warren template delete host >/dev/null 2>&1; rm -rf $R' EXIT
$A/warren template create host --from host > /dev/null
$A/warren create z0 --template host > /dev/null
$A/warren install z0 > /dev/null
$A/warren clone z0 $(seq -f 'z%g' 1 $((N-1))) > /dev/null
sleep 3
perf record -a -g -F 999 -o $O/boot.data -- $A/warren boot --all > /dev/null 2>&1
perf report -i $O/boot.data --no-children --sort comm,dso -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20 > $O/by-comm.txt
perf report -i $O/boot.data --comm warren --children --sort sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -120 > $O/warren-children.txt
