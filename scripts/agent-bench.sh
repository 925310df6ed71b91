#!/usr/bin/env bash
# What `warren agent` costs: boot N zones (default 500) from the host template in a
# temporary state root, run the agent for S seconds (default 30) twice, and report its
# CPU time as % of one CPU (utime + stime from /proc/PID/stat):
#   calm: default thresholds, nothing crossed (it reads /proc files only);
#   hot:  a threshold active all the time (--dry-run, available trigger 100 %): it
#         reads every zone once per cool-down (10 s), when an eviction is due;
#   scan: the same with cooldown-s = 0, so it reads every zone every tick (500 ms):
#         the cost of one scan of N zones, twice a second (the worst case).
# Then halts and deletes everything. Needs root.
#
#   ./scripts/agent-bench.sh            # 500 zones, 30 s each
#   ./scripts/agent-bench.sh 1000 60
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
n=${1:-500}
secs=${2:-30}
cargo build --release --quiet
W=$PWD/target/x86_64-unknown-linux-gnu/release/warren
WARREN_ROOT=$(mktemp -d /tmp/warren-agent-bench.XXXXXX)
export WARREN_ROOT
agent=""

cleanup() {
    [ -n "$agent" ] && kill "$agent" 2>/dev/null || true
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
"$W" create base --set priority=best-effort --set memory.request=16M >/dev/null
"$W" install base >/dev/null
for i in $(seq -w 1 "$n"); do
    "$W" clone base "z$i" >/dev/null
done
"$W" boot --all >/dev/null
"$W" halt base >/dev/null
running=$("$W" list --json | grep -c '"state": "running"' || true)
tck=$(getconf CLK_TCK)
echo "warren agent over $running running zones, ${secs} s each (Linux $(uname -r), $(nproc) CPUs), release build"

measure() {
    local label=$1
    shift
    "$W" agent "$@" >/dev/null &
    agent=$!
    sleep 2 # past start-up (the first zone refresh)
    local a b
    a=$(awk '{print $14 + $15}' "/proc/$agent/stat")
    sleep "$secs"
    b=$(awk '{print $14 + $15}' "/proc/$agent/stat")
    kill "$agent"
    wait "$agent" 2>/dev/null || true
    agent=""
    echo "$label: $(awk -v d=$((b - a)) -v t="$tck" -v s="$secs" 'BEGIN { printf "%.2f %% of one CPU (%d ticks in %d s)", d * 100 / t / s, d, s }')"
}
measure "calm (defaults, interval 500 ms)"
cfg="$WARREN_ROOT/hot.toml"
printf 'interval-ms = 500\n[available]\ntrigger = 100.0\nclear = 100.0\ngrace-s = 0.0\n' >"$cfg"
measure "hot (threshold active, zones read once per 10 s cool-down, dry run)" --dry-run --config "$cfg"
printf 'interval-ms = 500\ncooldown-s = 0.0\n[available]\ntrigger = 100.0\nclear = 100.0\ngrace-s = 0.0\n' >"$cfg"
measure "scan (cooldown 0: every zone read every tick, dry run)" --dry-run --config "$cfg"
