#!/bin/bash
# warren demo --zones N --json with a temporary state root; $1 bindir, $2 N, $3 out file
set -u
R=$(mktemp -d /tmp/s16demo.XXXX)
uptime > $3.uptime
WARREN_ROOT=$R WARREN_RUN_DIR=/tmp/wrun-s16demo $1/warren demo --zones $2 ${JOBS:+--jobs $JOBS} --json > $3 2> $3.err
echo rc=$? >> $3.uptime
uptime >> $3.uptime
rm -rf $R
