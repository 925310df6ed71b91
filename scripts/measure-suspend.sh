#!/usr/bin/env bash
# What a suspend costs (docs/suspend.md, SPEC.md "Suspended zones"): one zone whose
# process holds MIB MiB of anonymous memory (touched page by page), warren's swap (a
# file, or zram), then ROUNDS times: suspend (freeze and pageout times, resident before
# and after, swapped), resume (thaw time), the process's first touch of all its pages
# (from swap) and a second touch (resident again), timed inside the zone. As root, in
# a temporary state root; removes the zone and the swap on exit, also on failure.
#   scripts/measure-suspend.sh [file|zram] [ROUNDS] [MIB] [path/to/warren]
# Environment (docs/suspend.md, "Warm again"): ZRAM_ALG=lz4 (zram's compressor),
# PAGE_CLUSTER=0 (vm.page-cluster for the run, restored on exit), PREFETCH=1 (resume
# --prefetch), MTHP=64 (anonymous memory in 64 KiB folios — mTHP — for the run:
# /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled = always, restored on
# exit; the folios' swap-out and swap-in counts are printed at the end). The last column, warm_ms, is thaw + prefetch + first touch: from the
# resume to the whole working set resident again.
set -euo pipefail
KIND=${1:-file}
ROUNDS=${2:-5}
MIB=${3:-256}
W=${4:-target/x86_64-unknown-linux-gnu/debug/warren}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
command -v python3 >/dev/null || { echo "needs python3 (the zone's workload)" >&2; exit 1; }
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-suspend-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=$TMP/run WARREN_OCI_ROOT=$TMP/oci
OLD_PC=$(cat /proc/sys/vm/page-cluster)
THP=/sys/kernel/mm/transparent_hugepage
MTHP_DIR=${MTHP:+$THP/hugepages-${MTHP}kB}
[ -z "$MTHP_DIR" ] || [ -w "$MTHP_DIR/enabled" ] || { echo "MTHP=$MTHP: this kernel has no $MTHP_DIR" >&2; exit 1; }
OLD_MTHP=${MTHP_DIR:+$(grep -o '\[[a-z]*\]' "$MTHP_DIR/enabled" | tr -d '[]')}
cleanup() {
    echo "$OLD_PC" > /proc/sys/vm/page-cluster
    [ -z "$MTHP_DIR" ] || echo "$OLD_MTHP" > "$MTHP_DIR/enabled"
    "$W" halt --all --timeout 1 >/dev/null 2>&1 || true
    "$W" delete --force m >/dev/null 2>&1 || true
    "$W" swap disable >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$WARREN_ROOT"
[ -n "${PAGE_CLUSTER:-}" ] && echo "$PAGE_CLUSTER" > /proc/sys/vm/page-cluster
[ -z "$MTHP_DIR" ] || echo always > "$MTHP_DIR/enabled"
mthp_stats() { [ -z "$MTHP_DIR" ] || for f in anon_fault_alloc swpout swpout_fallback swpin swpin_fallback; do printf '%s=%s ' "$f" "$(cat "$MTHP_DIR/stats/$f")"; done; }
MTHP_BEFORE=$(mthp_stats)
if [ "$KIND" = zram ]; then
    "$W" swap enable --zram --size 1G ${ZRAM_ALG:+--zram-algorithm "$ZRAM_ALG"} >/dev/null
else
    "$W" swap enable --size 1G >/dev/null
fi
"$W" template create host --from host >/dev/null
"$W" create m --set memory.max=1G >/dev/null
"$W" install m >/dev/null
"$W" boot m >/dev/null
ROOT=$("$W" --json info m | python3 -c 'import json,sys; print(json.load(sys.stdin)["root"])')
# The process waits for SIGUSR1 (a file the host made in the zone's upper directory
# would stay unseen behind overlayfs's cached lookup), then touches every page.
"$W" login m -- /bin/sh -c "python3 -c '
import signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
b = bytearray($MIB << 20)
for i in range(0, len(b), 4096): b[i] = 1
open(\"/tmp/ready\", \"w\").write(\"1\")
n = 0
while True:
    signal.sigwait({signal.SIGUSR1})
    t = time.perf_counter()
    s = 0
    for i in range(0, len(b), 4096): s += b[i]
    open(\"/tmp/touch%d\" % n, \"w\").write(\"%.6f\" % (time.perf_counter() - t))
    n += 1
' </dev/null >/dev/null 2>&1 &"
for _ in $(seq 600); do [ -e "$ROOT/tmp/ready" ] && break; sleep 0.1; done
[ -e "$ROOT/tmp/ready" ] || { echo "the workload did not start" >&2; exit 1; }
MEMCG=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([x[1] for x in d["cgroups"]["dirs"] if "memory" in x[0].split(",") or x[0]==""][0])' "$WARREN_ROOT/zones/m/runtime.json")
PY=
for p in $(cat "$MEMCG/cgroup.procs"); do
    grep -q python3 "/proc/$p/cmdline" 2>/dev/null && PY=$p
done
[ -n "$PY" ] || { echo "the workload's process is not in the zone's cgroup" >&2; exit 1; }
touch_ms() { # N: let the process touch its pages once, print the time in ms
    kill -USR1 "$PY"
    for _ in $(seq 2000); do [ -s "$ROOT/tmp/touch$1" ] && break; sleep 0.005; done
    python3 -c "print('%.1f' % (float(open('$ROOT/tmp/touch$1').read()) * 1000))"
}
n=0
echo "# $(uname -r), $(nproc) CPUs, swap: $KIND $(cat /sys/block/zram0/comp_algorithm 2>/dev/null | grep -o '\[[^]]*\]' || true), page-cluster $(cat /proc/sys/vm/page-cluster), prefetch ${PREFETCH:-0}, mTHP ${MTHP:-off}, $MIB MiB; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# a touch of every page while resident (the loop's own cost): $(touch_ms $n) ms"; n=$((n+1))
printf '%-6s %9s %11s %12s %12s %11s %8s %11s %14s %15s %8s\n' round freeze_ms pageout_ms resident_MiB after_MiB swapped_MiB thaw_ms prefetch_ms first_touch_ms second_touch_ms warm_ms
for r in $(seq "$ROUNDS"); do
    s=$("$W" --json suspend m)
    if [ "${PREFETCH:-0}" = 1 ]; then u=$("$W" --json resume --prefetch m); else u=$("$W" --json resume m); fi
    first=$(touch_ms $n); n=$((n+1))
    second=$(touch_ms $n); n=$((n+1))
    python3 - "$r" "$s" "$u" "$first" "$second" <<'EOF'
import json, sys
r, s, u, first, second = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
mib = lambda b: b / (1 << 20)
pf = u.get('prefetch_ms') or 0.0
print('%-6s %9.2f %11.1f %12.1f %12.1f %11.1f %8.2f %11.1f %14s %15s %8.1f' % (
    r, s['freeze_ms'], s['pageout_ms'], mib(s['resident_before']), mib(s['resident_after']),
    mib(s['swapped']), u['thaw_ms'], pf, first, second, u['thaw_ms'] + pf + float(first)))
EOF
done
[ -z "$MTHP_DIR" ] || echo "# ${MTHP} KiB folios, before: $MTHP_BEFORE; after: $(mthp_stats)"
