#!/bin/bash
# alternate base/new demos; 100 zones x3, then 1000 x1
cd /tmp/uxp
for n in 100 100 100 1000; do for v in base new; do R=$(mktemp -d /tmp/uxp/demo.XXXX); echo "== $v $n"; /tmp/uxp/$v-bin/warren demo --root $R --zones $n 2>&1 | tail -10; rm -rf $R; done; done
