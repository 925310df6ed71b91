#!/bin/bash
# usage: run.sh BINDIR N NAME -- one `warren demo --zones N` in a temporary root, sampled
W=$1/warren; R=$(mktemp -d /tmp/s7root.XXXX); D=$(dirname $0); O=/tmp/s7q/$3; rm -rf $O; mkdir -p $O
CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
probe(){ a=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo); for i in $(seq 50); do mkdir $CG/s7qp$i; done; b=$(awk '$1=="kmalloc-1k"{print $2}' /proc/slabinfo); for i in $(seq 50); do rmdir $CG/s7qp$i; done; echo "kmalloc-1k per empty memcg: $(( (b-a)/50 ))"; }
uptime > $O/uptime; free -m > $O/free.before; probe > $O/probe.before; cat /proc/self/mountinfo > $O/mountinfo.host
$D/sample.sh $O $R & SP=$!; sleep 1.2
$W demo --root $R --zones $2 > $O/demo.txt 2>&1; echo rc=$? >> $O/demo.txt
sleep 1; touch $O/stop; wait $SP; probe > $O/probe.after; uptime >> $O/uptime; free -m > $O/free.after; rm -rf $R
