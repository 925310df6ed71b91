#!/bin/bash
# usage: i18b-run.sh BINDIR OUTDIR
# Sequential (--jobs 1) vs pipelined (default --jobs) clone, boot and halt of N zones
# through the CLI (wall time; boot's per-zone boot_ms from --json), interleaved, at
# N = 100 and 300; strace -c of one clone and strace -T of one halt with N running;
# then warren demo at 100 and 300, --jobs 1 and default, interleaved.
W=$1/warren; OUT=$2; mkdir -p $OUT
R=$(mktemp -d /tmp/i18b-run.XXXX); export WARREN_ROOT=$R WARREN_RUN_DIR=$R/run
trap '$W halt --all >/dev/null 2>&1; for z in $(ls $R/zones 2>/dev/null | grep -v "^\\."); do $W delete --force $z >/dev/null 2>&1; done; $W template delete host >/dev/null 2>&1; rm -rf $R' EXIT
$W template create host --from host >/dev/null; $W create base >/dev/null; $W install base >/dev/null
now() { date +%s.%N; }
round() { # N JOBS TAG
  local n=$1 j=$2 tag=$3 names t0 t1 t2 t3
  names=$(seq -f "z%g" 1 $n)
  echo "# $tag N=$n jobs=$j $(uptime)" >> $OUT/uptime.log
  t0=$(now); $W clone base $names --jobs $j >/dev/null || echo "clone failed $tag"
  t1=$(now); $W --json boot $names --jobs $j > $OUT/boot-$tag.json || echo "boot failed $tag"
  t2=$(now)
  if [ -n "$STRACE" ]; then
    strace -c -f -b execve -o $OUT/strace$n-$tag.clone $W clone base probe >/dev/null
    $W boot probe >/dev/null
    strace -f -T -tt -o $OUT/strace$n-$tag.halt $W halt probe >/dev/null
    $W delete --force probe >/dev/null
  fi
  t2=$(now); $W --json halt --all --jobs $j > $OUT/halt-$tag.json || echo "halt failed $tag"
  t3=$(now)
  python3 - "$tag" "$n" "$j" "$t0" "$t1" "$t2" "$t3" "$OUT/boot-$tag.json" >> $OUT/cli.tsv <<'PY'
import json, statistics, sys
tag, n, j, t0, t1, t2, t3, bj = sys.argv[1:]
t0, t1, t2, t3 = map(float, (t0, t1, t2, t3))
b = sorted(r["boot_ms"] for r in json.load(open(bj)) if r.get("boot_ms"))
p99 = b[min(len(b) - 1, int(round(0.99 * (len(b) - 1))))]
print(f"{tag}\t{n}\t{j}\t{t1-t0:.2f}\t{t2-t1:.2f}\t{t3-t2:.2f}\t{statistics.median(b):.1f}\t{p99:.1f}\t{max(b):.1f}")
PY
  for z in $names; do $W delete --force $z >/dev/null; done
}
printf "tag\tN\tjobs\tclone_s\tboot_s\thalt_s\tboot_ms_median\tboot_ms_p99\tboot_ms_max\n" > $OUT/cli.tsv
STRACE=1 round 100 1 seq100a; STRACE=1 round 100 16 pipe100a
round 100 1 seq100b; round 100 16 pipe100b
STRACE=1 round 300 1 seq300; STRACE=1 round 300 16 pipe300
$W delete --force base >/dev/null; $W template delete host >/dev/null
for spec in "100 1 a" "100 16 a" "100 1 b" "100 16 b" "300 1 a" "300 16 a"; do
  set -- $spec
  echo "# demo N=$1 jobs=$2 $(uptime)" >> $OUT/uptime.log
  $W demo --zones $1 --jobs $2 --json > $OUT/demo$1-j$2-$3.json 2>>$OUT/demo.err
done
echo "# end $(uptime)" >> $OUT/uptime.log
