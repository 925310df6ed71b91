#!/usr/bin/env bash
# The daemon's memory with N running zones (SPEC.md, "The daemon"): a temporary state
# root with N busybox zones, booted through one API operation, then the daemon's VmRSS
# idle, after listing them and after a stat of all; everything is halted and removed at
# the end (also on failure). Usage, as root: scripts/daemon-rss.sh [N] [BIN_DIR]
# (N <= 300 on shared machines; BIN_DIR defaults to the release build).
set -euo pipefail
n=${1:-300}
bin=${2:-$(dirname "$0")/../target/x86_64-unknown-linux-gnu/release}
bin=$(cd "$bin" && pwd)
root=$(mktemp -d /tmp/warren-daemon-rss.XXXXXX)
export WARREN_ROOT=$root WARREN_RUN_DIR=$root/run
sock=$root/api.sock
W="$bin/warren"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    "$W" halt --all --timeout 2 >/dev/null 2>&1 || true
    for z in $(ls "$root/zones" 2>/dev/null); do "$W" delete --force "$z" >/dev/null 2>&1 || true; done
    "$W" template delete bb >/dev/null 2>&1 || true
    rm -rf "$root"
}
trap cleanup EXIT
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
api() { curl -sS --unix-socket "$sock" "$@"; }

"$W" template create bb --busybox >/dev/null
for i in $(seq 1 "$n"); do "$W" create "r$i" --template bb >/dev/null; "$W" install "r$i" >/dev/null; done
"$bin/warren-daemon" --socket "$sock" 2>/dev/null &
pid=$!
until [ -S "$sock" ]; do sleep 0.1; done
echo "zones: $n; daemon rss at start: $(rss) KiB"
t0=$(date +%s.%N)
op=$(api -XPOST http://w/1.0/operations -H 'content-type: application/json' -d '{"verb":"boot","all":true,"watch_ms":0}' | sed 's/.*"operation":"\([^"]*\)".*/\1/')
until api "http://w$op" | grep -q '"status":"success"'; do
    api "http://w$op" | grep -q '"status":"failure"' && { api "http://w$op"; exit 1; }
    sleep 0.5
done
t1=$(date +%s.%N)
echo "boot of all through one operation: $(echo "$t1 - $t0" | bc) s; daemon rss: $(rss) KiB"
running=$(api http://w/1.0/zones | grep -o '"state":"running"' | wc -l)
echo "running (GET /1.0/zones): $running; daemon rss after the list: $(rss) KiB"
t0=$(date +%s.%N); api http://w/1.0/zones >/dev/null; t1=$(date +%s.%N)
echo "GET /1.0/zones of $n running zones: $(echo "($t1 - $t0) * 1000" | bc) ms"
api http://w/1.0/stat >/dev/null
echo "daemon rss after a stat of all: $(rss) KiB"
op=$(api -XPOST http://w/1.0/operations -H 'content-type: application/json' -d '{"verb":"halt","all":true,"timeout_s":2}' | sed 's/.*"operation":"\([^"]*\)".*/\1/')
until api "http://w$op" | grep -qE '"status":"(success|failure)"'; do sleep 0.5; done
echo "halted all; daemon rss: $(rss) KiB"
