#!/bin/bash
# usage: i18-run.sh BINDIR N NAME
W=$1/warren; R=$(mktemp -d /tmp/i18root.XXXX); O=/tmp/i18m/$3; rm -rf $O; mkdir -p $O
CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
probe(){ a=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo); for i in $(seq 50); do mkdir $CG/i18p$i; done; b=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo); for i in $(seq 50); do rmdir $CG/i18p$i; done; echo "kmalloc-1k per empty memcg: $(( (b-a)/50 ))"; }
uptime > $O/uptime; probe > $O/probe.before
/tmp/i18-sample.sh $O & SP=$!; sleep 1.2
$W demo --root $R --zones $2 > $O/demo.txt 2>&1; echo rc=$? >> $O/demo.txt
sleep 1; touch $O/stop; wait $SP; probe > $O/probe.after; uptime >> $O/uptime; rm -rf $R
