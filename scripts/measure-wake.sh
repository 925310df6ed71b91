#!/usr/bin/env bash
# The cost of watching suspended zones for a wake (docs/suspend.md, "One wait for all
# suspended zones"; SPEC.md, "Suspended zones"): N bridged busybox zones, each running
# httpd on port 80, all suspended; then `warren agent` (interval-ms = 100) twice, first
# sweeping every suspended zone's sockets each tick (wake-hold = false: five sock_diag
# dumps a zone), then holding them in one epoll set (wake-hold = true). For each: the
# agent's CPU time per second over SECS seconds once it has read the zones (from
# /proc/PID/stat), and the first request to SAMPLES suspended zones (connect to last
# byte from the host, including the agent's wake; different zones for each mode).
# As root, in a temporary state root; everything (zones, template, bridge, agent) is
# removed on exit, also on failure or Ctrl-C. Check `free -g` first for N > 300.
#   scripts/measure-wake.sh [N] [SECS] [SAMPLES] [path/to/warren]
set -euo pipefail
N=${1:-100}
SECS=${2:-10}
SAMPLES=${3:-20}
W=${4:-target/x86_64-unknown-linux-gnu/release/warren}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
BB=$(command -v busybox) || { echo "needs busybox (apt-get install busybox-static)" >&2; exit 1; }
file -L "$BB" | grep -q static || BB=/bin/busybox
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-wake-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=$TMP/run WARREN_OCI_ROOT=$TMP/oci
BR=wwake$$
AGENT=
cleanup() {
    [ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null || true
    "$W" halt --all --timeout 2 >/dev/null 2>&1 || true
    for z in $("$W" list --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(z["name"] for z in json.load(sys.stdin)))' 2>/dev/null); do
        "$W" delete --force "$z" >/dev/null 2>&1 || true
    done
    "$W" template delete wake >/dev/null 2>&1 || true
    ip link del "$BR" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
mkdir -p "$WARREN_ROOT" "$TMP/rootfs/bin" "$TMP/rootfs/www"
cp "$BB" "$TMP/rootfs/bin/busybox"
for a in sh httpd sleep; do ln -s busybox "$TMP/rootfs/bin/$a"; done
echo '<html><body>warren wake zone</body></html>' > "$TMP/rootfs/www/index.html"
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB; N=$N, agent interval-ms = 100; uptime: $(uptime)"
"$W" template create wake --from-dir "$TMP/rootfs" >/dev/null
"$W" create w0 -t wake --set net=bridge --set net-bridge="$BR" --set net-subnet=10.239.0.0/16 \
    --set memory.max=32M --set 'services=["httpd -f -p 80 -h /www"]' >/dev/null
"$W" install w0 >/dev/null
NAMES=$(seq -f 'w%g' 1 "$N")
"$W" clone w0 $NAMES >/dev/null
t=$(date +%s.%N); "$W" boot $NAMES >/dev/null; echo "boot $N: $(python3 -c "print('%.1f s' % ($(date +%s.%N) - $t))")"
python3 - "$WARREN_ROOT" "$N" > "$TMP/addrs" <<'EOF'
import json, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    print(json.load(open("%s/zones/w%d/runtime.json" % (root, i)))["net"]["address"])
EOF
python3 - "$TMP/addrs" <<'EOF'
import socket, sys, time
deadline = time.time() + 300
for a in open(sys.argv[1]).read().split():
    while True:
        try:
            s = socket.create_connection((a, 80), timeout=2); s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            if s.recv(64).startswith(b"HTTP/1.1 200"): break
        except OSError:
            pass
        if time.time() > deadline: sys.exit("zone at %s does not answer" % a)
        time.sleep(0.2)
EOF
# No swap: only the freeze/thaw path (the suspend says so for every zone, on stderr).
t=$(date +%s.%N); "$W" suspend $NAMES >/dev/null 2>&1; echo "suspend $N: $(python3 -c "print('%.1f s' % ($(date +%s.%N) - $t))")"
HZ=$(getconf CLK_TCK)
K=0
for HOLD in false true; do
    printf 'interval-ms = 100\nwake-scan-s = 1.0\nwake-hold = %s\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n' "$HOLD" > "$TMP/agent.toml"
    "$W" agent --config "$TMP/agent.toml" > "$TMP/agent-$HOLD.log" 2>&1 &
    AGENT=$!
    # Let it read the zones (and, holding, take their sockets) before measuring.
    sleep 5
    c0=$(awk '{print $14 + $15}' "/proc/$AGENT/stat"); t0=$(date +%s.%N)
    sleep "$SECS"
    c1=$(awk '{print $14 + $15}' "/proc/$AGENT/stat"); t1=$(date +%s.%N)
    python3 -c "
c = ($c1 - $c0) / $HZ * 1000; w = $t1 - $t0
print('wake-hold = $HOLD, $N suspended zones: agent CPU %.1f ms per second (%.2f ms per 100 ms tick) over %.1f s; %s descriptors open' % (c / w, c / w / 10, w, len(__import__('os').listdir('/proc/$AGENT/fd'))))"
    python3 - "$TMP/addrs" "$K" "$SAMPLES" <<'EOF'
import socket, sys, time
addrs = open(sys.argv[1]).read().split()
k, samples = int(sys.argv[2]), int(sys.argv[3])
def get(a, timeout=30):
    t = time.perf_counter()
    s = socket.create_connection((a, 80), timeout=timeout)
    s.settimeout(timeout)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    out = b""
    while True:
        d = s.recv(4096)
        if not d: break
        out += d
    s.close()
    if not out.startswith(b"HTTP/1.1 200"): raise OSError("bad answer")
    return (time.perf_counter() - t) * 1000
first = sorted(get(addrs[i]) for i in range(k, min(len(addrs), k + samples)))
q = lambda v, p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
print("  first request to a suspended zone, %d zones: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (len(first), q(first, .5), q(first, .99), first[-1]))
EOF
    kill "$AGENT"; wait "$AGENT" 2>/dev/null || true; AGENT=
    grep -h 'wake-hold\|held in one wait\|swept' "$TMP/agent-$HOLD.log" | head -3 | sed 's/^/  agent: /' || true
    K=$((K + SAMPLES))
done
echo "# uptime at the end: $(uptime)"
