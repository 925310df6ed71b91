#!/usr/bin/env bash
# Issue 19's fleet target (SPEC.md, "Suspended zones"): N bridged zones, each a small
# real service — busybox httpd on port 80 plus 8 MiB of state held in memory by a
# busybox sh (access-log-like text, about 3.3:1 with lz4: compressible as real data,
# not a page of zeroes) — of which PCT % are suspended to zram. Reports host memory
# (MemAvailable and /proc/meminfo deltas) at each stage, the first-request latency of
# SAMPLES suspended zones woken by `warren agent` (connect to last byte, from the host),
# and the total throughput of the running ones for 10 s. As root, in a temporary state
# root; everything (zones, template, bridge, zram swap, agent) is removed on exit, also
# on failure or Ctrl-C. More than 300 zones: run it inside
#   flock /work/notes/s6/bigrun.lock scripts/measure-fleet.sh N ...
#   scripts/measure-fleet.sh [N] [PCT] [SAMPLES] [path/to/warren] [ZRAM_ALG]
set -euo pipefail
N=${1:-100}
PCT=${2:-90}
SAMPLES=${3:-30}
W=${4:-target/x86_64-unknown-linux-gnu/release/warren}
ALG=${5:-lz4}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
BB=$(command -v busybox) || { echo "needs busybox (apt-get install busybox-static)" >&2; exit 1; }
file -L "$BB" | grep -q static || BB=/bin/busybox
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-fleet-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=$TMP/run WARREN_OCI_ROOT=$TMP/oci
BR=wfleet$$
AGENT=
cleanup() {
    [ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null || true
    "$W" halt --all --timeout 2 >/dev/null 2>&1 || true
    for z in $("$W" list --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(z["name"] for z in json.load(sys.stdin)))' 2>/dev/null); do
        "$W" delete --force "$z" >/dev/null 2>&1 || true
    done
    "$W" template delete fleet >/dev/null 2>&1 || true
    "$W" swap disable >/dev/null 2>&1 || true
    ip link del "$BR" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
mkdir -p "$WARREN_ROOT" "$TMP/rootfs/bin" "$TMP/rootfs/www"
cp "$BB" "$TMP/rootfs/bin/busybox"
for a in sh httpd cat sleep; do ln -s busybox "$TMP/rootfs/bin/$a"; done
echo '<html><body>warren fleet zone</body></html>' > "$TMP/rootfs/www/index.html"
python3 - "$TMP/rootfs/www/state.txt" <<'EOF'
import random, sys
random.seed(19)
paths = ["/", "/index.html", "/api/items", "/api/cart", "/static/app.js", "/login", "/search"]
agents = ["Mozilla/5.0 (X11; Linux x86_64)", "curl/7.88.1", "python-requests/2.31"]
out, n = [], 0
while n < 8 << 20:
    l = '10.%d.%d.%d - - [04/Dec/2026:%02d:%02d:%02d +0000] "GET %s?id=%d HTTP/1.1" %d %d "-" "%s"\n' % (
        random.randrange(256), random.randrange(256), random.randrange(256), random.randrange(24),
        random.randrange(60), random.randrange(60), random.choice(paths), random.randrange(10**6),
        random.choice([200, 200, 200, 304, 404]), random.randrange(100, 90000), random.choice(agents))
    out.append(l)
    n += len(l)
open(sys.argv[1], "w").write("".join(out)[: 8 << 20])
EOF
meminfo() { python3 -c '
import sys
m = {l.split(":")[0]: int(l.split()[1]) // 1024 for l in open("/proc/meminfo")}
print("MemAvailable %d MiB, AnonPages %d, Shmem %d, Slab %d, PageTables %d, SwapUsed %d, zram mem_used %d MiB" % (
    m["MemAvailable"], m["AnonPages"], m["Shmem"], m["Slab"], m["PageTables"], m["SwapTotal"] - m["SwapFree"],
    int((open("/sys/block/zram0/mm_stat").read().split() or [0, 0, 0])[2]) >> 20))'; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB; N=$N, $PCT % suspended, zram $ALG; uptime: $(uptime)"
echo "start:            $(meminfo)"
"$W" swap enable --zram --zram-algorithm "$ALG" --size $(( (N * 12 / 1024) + 1 ))G >/dev/null
"$W" template create fleet --from-dir "$TMP/rootfs" >/dev/null
"$W" create f0 -t fleet --set net=bridge --set net-bridge="$BR" --set net-subnet=10.238.0.0/16 \
    --set memory.max=64M \
    --set 'services=["httpd -f -p 80 -h /www", "X=$(cat /www/state.txt); while :; do sleep 86400; done"]' >/dev/null
"$W" install f0 >/dev/null
NAMES=$(seq -f 'f%g' 1 "$N")
t=$(date +%s.%N); "$W" clone f0 $NAMES >/dev/null; echo "clone $N: $(python3 -c "print('%.1f s' % ($(date +%s.%N) - $t))")"
echo "installed:        $(meminfo)"
t=$(date +%s.%N); "$W" boot $NAMES >/dev/null; echo "boot $N: $(python3 -c "print('%.1f s' % ($(date +%s.%N) - $t))")"
python3 - "$WARREN_ROOT" "$N" > "$TMP/addrs" <<'EOF'
import json, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    print(json.load(open("%s/zones/f%d/runtime.json" % (root, i)))["net"]["address"])
EOF
# Wait until every zone serves and holds its state.
python3 - "$TMP/addrs" <<'EOF'
import socket, sys, time
addrs = open(sys.argv[1]).read().split()
deadline = time.time() + 300
for a in addrs:
    while True:
        try:
            s = socket.create_connection((a, 80), timeout=2); s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            if s.recv(64).startswith(b"HTTP/1.1 200"): break
        except OSError:
            pass
        if time.time() > deadline: sys.exit("zone at %s does not answer" % a)
        time.sleep(0.2)
EOF
sleep 5
echo "all running:      $(meminfo)"
NS=$(( N * PCT / 100 ))
SUSP=$(seq -f 'f%g' 1 "$NS")
t=$(date +%s.%N); "$W" suspend $SUSP >/dev/null; echo "suspend $NS: $(python3 -c "print('%.1f s' % ($(date +%s.%N) - $t))")"
sleep 5
echo "$NS suspended:   $(meminfo)"
"$W" list --json | python3 -c '
import json, sys
zs = [z for z in json.load(sys.stdin) if z.get("suspended")]
r = sorted(z["suspended"]["resident"] for z in zs)
print("suspended zones: %d; charged per zone median %.2f MiB, max %.2f MiB; swapped per zone median %.2f MiB" % (
    len(zs), r[len(r)//2] / 2**20, r[-1] / 2**20, sorted(z["suspended"]["swapped"] for z in zs)[len(zs)//2] / 2**20))'
printf 'interval-ms = 100\nwake-scan-s = 1.0\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n' > "$TMP/agent.toml"
"$W" agent --config "$TMP/agent.toml" > "$TMP/agent.log" 2>&1 &
AGENT=$!
sleep 3
python3 - "$TMP/addrs" "$NS" "$SAMPLES" "$N" <<'EOF'
import socket, sys, time, threading, random
addrs = open(sys.argv[1]).read().split()
ns, samples, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
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
warm = sorted(get(addrs[i]) for i in range(ns, min(n, ns + samples)))
random.seed(1)
first = []
for i in random.sample(range(ns), min(samples, ns)):
    first.append(get(addrs[i]))
first.sort()
q = lambda v, p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
print("first request to a suspended zone (agent wake, 100 ms ticks), %d zones: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (len(first), q(first, .5), q(first, .99), first[-1]))
print("a request to a running zone, %d zones: p50 %.1f ms, p99 %.1f ms" % (len(warm), q(warm, .5), q(warm, .99)))
running = addrs[ns:]
done, errors, stop = [0], [0], time.time() + 10
def worker(k):
    while time.time() < stop:
        try:
            get(running[(k + done[0]) % len(running)], 5); done[0] += 1
        except OSError:
            errors[0] += 1
ts = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
[t.start() for t in ts]; [t.join() for t in ts]
print("throughput over the %d running zones (16 client threads, HTTP/1.0, one connection per request, 10 s): %.0f requests/s, %d errors" % (len(running), done[0] / 10, errors[0]))
EOF
echo "after the wakes:  $(meminfo)"
echo "agent wakes: $(grep -c 'woke zone' "$TMP/agent.log" || true)"
echo "# uptime at the end: $(uptime)"
