#!/usr/bin/env bash
# What `warren stat` costs: boot N zones (default 500) from the host template in a
# temporary state root, time `warren stat` (and memstat, stat --pss) over all of them,
# then halt and delete everything. Needs root. Prints wall-clock milliseconds per run.
#
#   ./scripts/stat-bench.sh            # 500 zones, 5 runs each
#   ./scripts/stat-bench.sh 1000 3
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
n=${1:-500}
runs=${2:-5}
cargo build --release --quiet
W=$PWD/target/x86_64-unknown-linux-gnu/release/warren
WARREN_ROOT=$(mktemp -d /tmp/warren-stat-bench.XXXXXX)
export WARREN_ROOT

cleanup() {
    "$W" halt --all --timeout 5 >/dev/null 2>&1 || true
    local z
    for z in "$WARREN_ROOT"/zones/*; do
        [ -d "$z" ] && "$W" delete --force "$(basename "$z")" >/dev/null 2>&1 || true
    done
    "$W" template delete host >/dev/null 2>&1 || true
    rm -rf "$WARREN_ROOT"
}
trap cleanup EXIT

"$W" template create host --from host >/dev/null
"$W" create base >/dev/null
"$W" install base >/dev/null
for i in $(seq -w 1 "$n"); do
    "$W" clone base "z$i" >/dev/null
done
"$W" boot --all >/dev/null
"$W" halt base >/dev/null
sleep 1
running=$("$W" list --json | grep -c '"state": "running"' || true)
echo "warren stat over $running running zones (Linux $(uname -r), $(nproc) CPUs), release build"

time_ms() {
    local label=$1
    shift
    local all=() t0 t1
    for _ in $(seq 1 "$runs"); do
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        all+=("$(((t1 - t0) / 1000000))")
    done
    echo "$label: ${all[*]} ms"
}
time_ms "warren stat (includes its 0.5 s CPU window)" "$W" stat
time_ms "warren stat --json" "$W" stat --json
time_ms "warren stat --sort mem" "$W" stat --sort mem
time_ms "warren memstat" "$W" memstat
time_ms "warren stat --pss" "$W" stat --pss
time_ms "warren list (for comparison)" "$W" list
