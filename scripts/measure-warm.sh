#!/usr/bin/env bash
# Issue 19's "64 MiB working set warm again <= 100 ms p99 from zram", tried every way
# the kernel offers (docs/suspend.md, "Warm again"): zram's compressor x vm.page-cluster
# x prefetch on resume x anonymous memory in large folios (mTHP, swapped out and in
# whole), ROUNDS suspend/resume rounds each, all in one run, then p50, p99 and max of
# warm_ms (thaw + prefetch + first touch) per configuration (CONFIGS, below).
#   scripts/measure-warm.sh [ROUNDS] [MIB] [path/to/warren]
# As root; each configuration is one scripts/measure-suspend.sh run (its own temporary
# root, zone and zram swap, vm.page-cluster restored on exit).
set -euo pipefail
ROUNDS=${1:-20}
MIB=${2:-64}
W=${3:-target/x86_64-unknown-linux-gnu/debug/warren}
HERE=$(dirname "$0")
OUT=$(mktemp -d /tmp/warren-warm-XXXXXX)
trap 'rm -rf "$OUT"' EXIT
ALGS=$(tr -d '[]' < /sys/block/zram0/comp_algorithm)
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs; uptime: $(uptime)"
echo "# zram offers: $ALGS; $ROUNDS rounds of $MIB MiB per configuration"
# Configurations: compressor:page-cluster:prefetch(0/1):mTHP size in KiB (- for none).
CONFIGS=${CONFIGS:-"lzo-rle:3:0:- lzo-rle:3:1:- lzo-rle:0:0:- lz4:3:0:- lz4:0:0:- lz4:0:1:- lzo-rle:3:0:64 lz4:3:0:16 lz4:3:0:32 lz4:3:0:64 lz4:3:0:128 lz4:3:1:64"}
printf '| %-8s | %-12s | %-8s | %-5s | %6s | %6s | %6s | %11s |\n' compressor page-cluster prefetch mTHP p50_ms p99_ms max_ms prefetch_p50
for c in $CONFIGS; do
    IFS=: read -r alg pc pf mthp <<< "$c"
    case " $ALGS " in *" $alg "*) ;; *) echo "| $alg | - | - | - | not offered by this kernel's zram |"; continue ;; esac
    f=$OUT/$alg-$pc-$pf-$mthp
    [ "$mthp" = - ] && mthp=
    ZRAM_ALG=$alg PAGE_CLUSTER=$pc PREFETCH=$pf MTHP=$mthp "$HERE/measure-suspend.sh" zram "$ROUNDS" "$MIB" "$W" > "$f"
    python3 - "$f" "$alg" "$pc" "$pf" "${mthp:--}" <<'PY'
import sys
path, alg, pc, pf, mthp = sys.argv[1:]
rows = [l.split() for l in open(path) if l[:1].isdigit()]
warm = sorted(float(r[-1]) for r in rows)
pre = sorted(float(r[7]) for r in rows)
q = lambda v, p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
print('| %-8s | %-12s | %-8s | %-5s | %6.1f | %6.1f | %6.1f | %11.1f |' % (
    alg, pc, 'on' if pf == '1' else 'off', mthp, q(warm, .5), q(warm, .99), warm[-1], q(pre, .5)))
PY
    grep 'KiB folios' "$f" | sed 's/^/  /' || true
done
echo "# uptime at the end: $(uptime)"
