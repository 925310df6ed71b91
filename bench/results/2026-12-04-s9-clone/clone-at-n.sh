#!/usr/bin/env bash
# Clone cost against the number of zones already in the state root (issue 18, s9).
# Usage (as root, through /work/notes/s9/build): clone-at-n.sh OUT BEFORE AFTER [N...]
# For each N (zones already there, installed, not booted; filled by cloning with
# AFTER): 100 clones of one installed zone with the default pipeline and with
# --jobs 1, BEFORE and AFTER alternately in the same state root, each round deleted
# again; then `strace -c -f` and `strace -T -f` of one clone with each binary.
# Everything it makes is removed at exit, also on failure.
set -euo pipefail
OUT=$1; BEFORE=$(realpath "$2"); AFTER=$(realpath "$3"); shift 3
NS=("${@:-0 1000 5000}")
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/s9-i18-clone-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=/tmp/wrun-s9-i18
cleanup() {
    zs=$("$AFTER" list --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(z["name"] for z in json.load(sys.stdin)))' 2>/dev/null || true)
    [ -n "$zs" ] && "$AFTER" delete --force $zs >/dev/null 2>&1 || true
    "$AFTER" template delete ct >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
mkdir -p "$WARREN_ROOT" "$TMP/rootfs/bin" "$TMP/rootfs/www"
cp "$(command -v busybox)" "$TMP/rootfs/bin/busybox"
for a in sh httpd cat; do ln -s busybox "$TMP/rootfs/bin/$a"; done
echo hello > "$TMP/rootfs/www/index.html"
"$AFTER" template create ct --from-dir "$TMP/rootfs" >/dev/null
"$AFTER" create s -t ct >/dev/null
"$AFTER" install s >/dev/null
have=0
round() { # label binary prefix [--jobs 1]
    local label=$1 bin=$2 p=$3; shift 3
    local names; names=$(seq -f "$p%g" 1 100)
    local t0 t1
    t0=$(date +%s.%N); "$bin" clone s $names "$@" >/dev/null; t1=$(date +%s.%N)
    python3 -c "print('%-28s %7.3f s  (%.1f ms a clone)' % ('$label', $t1 - $t0, ($t1 - $t0) * 10))"
    "$AFTER" delete --force $names >/dev/null
}
for n in ${NS[@]}; do
    if [ "$n" -gt "$have" ]; then
        "$AFTER" clone s $(seq -f 'p%g' $((have + 1)) "$n") >/dev/null
        have=$n
    fi
    echo "== $n zones in the root ($(ls "$WARREN_ROOT/zones" | wc -l) entries in zones/, $(ls "$WARREN_ROOT/userns" 2>/dev/null | wc -l) in userns/); $(uptime)"
    for rep in 1 2; do
        round "before pipeline (rep $rep)" "$BEFORE" a
        round "after  pipeline (rep $rep)" "$AFTER" b
        round "before --jobs 1 (rep $rep)" "$BEFORE" c --jobs 1
        round "after  --jobs 1 (rep $rep)" "$AFTER" d --jobs 1
    done
    for which in before after; do
        bin=$BEFORE; [ $which = after ] && bin=$AFTER
        # Warm the path once (the first clone after another binary's changes may rebuild).
        "$bin" clone s w0 >/dev/null; "$AFTER" delete --force w0 >/dev/null
        strace -c -f -o "$OUT/strace-c-$n.$which" "$bin" clone s w1 >/dev/null
        strace -f -T -tt -o "$OUT/strace-T-$n.$which" "$bin" clone s w2 >/dev/null
        "$AFTER" delete --force w1 w2 >/dev/null
    done
done
echo "end: $(uptime)"
