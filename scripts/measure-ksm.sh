#!/usr/bin/env bash
# What memory.merge saves (docs/suspend.md, "KSM"; SPEC.md): N zones with
# memory.merge = true whose service holds the same MIB MiB of data (base64 of the
# host's /usr/bin, identical in every zone, different on every page), then the zones'
# anonymous memory before KSM and once ksmd has stopped finding more (at most 180 s),
# with each zone's ksm_stat profit. Starts ksmd if it is stopped and restores its
# `run` setting on exit (host-wide); as root, in a temporary state root, removing
# every zone on exit, also on failure.
#   scripts/measure-ksm.sh [N] [MIB] [path/to/warren]
set -euo pipefail
N=${1:-10}
MIB=${2:-32}
W=${3:-target/x86_64-unknown-linux-gnu/debug/warren}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
[ -e /sys/kernel/mm/ksm/run ] || { echo "this kernel has no KSM" >&2; exit 1; }
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-ksm-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=$TMP/run WARREN_OCI_ROOT=$TMP/oci
RUN0=$(cat /sys/kernel/mm/ksm/run)
cleanup() {
    "$W" halt --all --timeout 1 >/dev/null 2>&1 || true
    for z in $(ls "$WARREN_ROOT/zones" 2>/dev/null); do "$W" delete --force "$z" >/dev/null 2>&1 || true; done
    echo "$RUN0" > /sys/kernel/mm/ksm/run
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$WARREN_ROOT"
"$W" template create host --from host >/dev/null
RAW=$((MIB * 3 / 4 * 1048576))
SVC="services=[\"x=\$(cat /usr/bin/* 2>/dev/null | head -c $RAW | base64 -w0); echo held > /tmp/held; sleep 100000; echo \${#x}\"]"
for i in $(seq "$N"); do
    "$W" create "r$i" --set memory.merge=true --set "$SVC" >/dev/null
    "$W" install "r$i" >/dev/null
done
echo 0 > /sys/kernel/mm/ksm/run
for i in $(seq "$N"); do "$W" boot "r$i" >/dev/null; done
for i in $(seq "$N"); do
    root=$("$W" --json info "r$i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["root"])')
    for _ in $(seq 600); do [ -e "$root/tmp/held" ] && break; sleep 0.1; done
done
sum() { "$W" --json stat | python3 -c '
import json, sys
z = [r for r in json.load(sys.stdin)["zones"] if r["name"].startswith("r")]
anon = sum(r["memory"]["anon_bytes"] or 0 for r in z)
profit = sum((r["ksm"] or {}).get("profit_bytes", 0) for r in z)
pages = sum((r["ksm"] or {}).get("merging_pages", 0) for r in z)
print("%.1f %.1f %d" % (anon / 2**20, profit / 2**20, pages))'; }
read -r a0 _ _ <<<"$(sum)"
echo "# $(uname -r), $(nproc) CPUs; $N zones x $MIB MiB identical data; load: $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: noisy)"
echo "# before ksmd: zones' anon $a0 MiB"
echo 1 > /sys/kernel/mm/ksm/run
t0=$(date +%s)
last=-1
while :; do
    sleep 5
    s=$(cat /sys/kernel/mm/ksm/pages_sharing)
    [ "$s" = "$last" ] && [ "$s" -gt 0 ] && break
    last=$s
    [ $(( $(date +%s) - t0 )) -ge 180 ] && break
done
read -r a1 p1 m1 <<<"$(sum)"
echo "# after $(( $(date +%s) - t0 )) s of ksmd: zones' anon $a1 MiB, pages merged $m1, ksm profit $p1 MiB, host pages_sharing $(cat /sys/kernel/mm/ksm/pages_sharing), pages_shared $(cat /sys/kernel/mm/ksm/pages_shared)"
python3 -c "print('# saved: %.1f MiB of %.1f MiB (%.0f %%)' % ($p1, $a0, 100 * $p1 / $a0))"
