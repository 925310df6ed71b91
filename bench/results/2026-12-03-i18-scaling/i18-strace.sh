#!/bin/bash
# usage: i18-strace.sh BINDIR N OUT : N zones running, then strace -c -f one clone and one boot
W=$1/warren; N=$2; OUT=$3; R=$(mktemp -d /tmp/i18st.XXXX); export WARREN_ROOT=$R
$W template create host --from host >/dev/null; $W create i18src >/dev/null; $W install i18src >/dev/null
for i in $(seq $N); do $W clone i18src i18z$i >/dev/null || echo clone fail $i; done
names=$(seq -f "i18z%g" 1 $N); $W boot $names >/dev/null 2>&1 || echo boot-fail
echo running=$($W list | grep -c running)
strace -c -f -b execve -o $OUT.clone $W clone i18src i18probe >/dev/null
strace -c -f -b execve -o $OUT.boot $W boot i18probe
$W halt i18probe $names >/dev/null; $W delete --force i18probe i18src $names >/dev/null; $W template delete host >/dev/null
echo left=$($W list | wc -l); rm -rf $R
