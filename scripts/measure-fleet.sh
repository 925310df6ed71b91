#!/usr/bin/env bash
# Issue 19's fleet target (SPEC.md, "Suspended zones"): N bridged zones, each a small
# real service — busybox httpd on port 80 plus STATE_KIB (default 8 MiB) of state held
# in memory by a busybox sh (access-log-like text, about 3.3:1 with lz4: compressible as
# real data, not a page of zeroes) — of which PCT % are suspended to zram. The zones
# come up in waves of at most 1,000, one bridge (and one /16) per wave, as a host past a
# bridge's 1,023 ports must spread them; in each wave PCT % are suspended once the wave
# serves, so the host never holds more than one wave running beyond the fleet's running
# share. Reports host memory (MemAvailable and /proc/meminfo deltas) after each wave,
# the first-request latency of SAMPLES suspended zones woken by `warren agent` (connect
# to last byte, from the host), and the total throughput of the running ones for 10 s.
# The sysctls `warren doctor --fix` raises for the plan (pid_max, neighbour tables, …)
# are applied live only and put back on exit. As root, in a temporary state root;
# everything (zones, template, bridges, zram swap, agent, sysctls) is removed or
# restored on exit, also on failure or Ctrl-C. More than 300 zones: run it alone
# (measurement lock).
#   scripts/measure-fleet.sh [N] [PCT] [SAMPLES] [path/to/warren] [ZRAM_ALG] [STATE_KIB]
set -euo pipefail
N=${1:-100}
PCT=${2:-90}
SAMPLES=${3:-30}
W=${4:-target/x86_64-unknown-linux-gnu/release/warren}
ALG=${5:-lz4}
STATE_KIB=${6:-8192}
WAVE=${FLEET_WAVE:-1000}  # zones a wave (one bridge each; a bridge holds 1,023 ports)
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
BB=$(command -v busybox) || { echo "needs busybox (apt-get install busybox-static)" >&2; exit 1; }
file -L "$BB" | grep -q static || BB=/bin/busybox
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-fleet-XXXXXX)
export WARREN_ROOT=$TMP/root WARREN_RUN_DIR=$TMP/run WARREN_OCI_ROOT=$TMP/oci
WAVES=$(( (N + WAVE - 1) / WAVE ))
[ "$WAVES" -le 50 ] || { echo "at most $((50 * WAVE)) zones (one /16 a wave from 10.200.0.0)" >&2; exit 1; }
for b in $(seq 0 $((WAVES - 1))); do
    if ip -4 route | grep -q "^10\.$((200 + b))\."; then echo "10.$((200 + b)).0.0/16 is in use on this host" >&2; exit 1; fi
done
AGENT=
cleanup() {
    [ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null || true
    "$W" halt --all --timeout 2 >/dev/null 2>&1 || true
    zs=$("$W" list --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(z["name"] for z in json.load(sys.stdin)))' 2>/dev/null || true)
    [ -n "$zs" ] && "$W" delete --force $zs >/dev/null 2>&1 || true
    "$W" template delete fleet >/dev/null 2>&1 || true
    "$W" swap disable >/dev/null 2>&1 || true
    for b in $(seq 0 $((WAVES - 1))); do ip link del "wfl$$b$b" 2>/dev/null || true; done
    # Put back every sysctl the doctor's fix raised for this run.
    if [ -s "$TMP/fix.json" ]; then
        python3 - "$TMP/fix.json" <<'EOF' || true
import json, sys
for c in json.load(open(sys.argv[1]))["fix"]["applied"]:
    open("/proc/sys/" + c["key"].replace(".", "/"), "w").write(str(c["from"]))
    print("restored %s = %d" % (c["key"], c["from"]))
EOF
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
mkdir -p "$WARREN_ROOT" "$TMP/rootfs/bin" "$TMP/rootfs/www" "$TMP/sysctl.d"
cp "$BB" "$TMP/rootfs/bin/busybox"
for a in sh httpd cat mkfifo; do ln -s busybox "$TMP/rootfs/bin/$a"; done
echo '<html><body>warren fleet zone</body></html>' > "$TMP/rootfs/www/index.html"
python3 - "$TMP/rootfs/www/state.txt" "$STATE_KIB" <<'EOF'
import random, sys
random.seed(19)
size = int(sys.argv[2]) << 10
paths = ["/", "/index.html", "/api/items", "/api/cart", "/static/app.js", "/login", "/search"]
agents = ["Mozilla/5.0 (X11; Linux x86_64)", "curl/7.88.1", "python-requests/2.31"]
out, n = [], 0
while n < size:
    l = '10.%d.%d.%d - - [04/Dec/2026:%02d:%02d:%02d +0000] "GET %s?id=%d HTTP/1.1" %d %d "-" "%s"\n' % (
        random.randrange(256), random.randrange(256), random.randrange(256), random.randrange(24),
        random.randrange(60), random.randrange(60), random.choice(paths), random.randrange(10**6),
        random.choice([200, 200, 200, 304, 404]), random.randrange(100, 90000), random.choice(agents))
    out.append(l)
    n += len(l)
open(sys.argv[1], "w").write("".join(out)[:size])
EOF
meminfo() { python3 -c '
import sys
m = {l.split(":")[0]: int(l.split()[1]) // 1024 for l in open("/proc/meminfo")}
z = open("/sys/block/zram0/mm_stat").read().split() if open("/proc/swaps").read().count("zram0") else [0, 0, 0]
print("MemAvailable %d MiB, AnonPages %d, Shmem %d, Slab %d (SUnreclaim %d), PageTables %d, SwapUsed %d, zram mem_used %d MiB" % (
    m["MemAvailable"], m["AnonPages"], m["Shmem"], m["Slab"], m["SUnreclaim"], m["PageTables"], m["SwapTotal"] - m["SwapFree"],
    int(z[2]) >> 20))'; }
avail_mib() { awk '/MemAvailable/{print int($2/1024)}' /proc/meminfo; }
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB; N=$N, $PCT % suspended, ${STATE_KIB} KiB of state a zone, zram $ALG, $WAVES wave(s) of at most $WAVE on their own bridges; uptime: $(uptime)"
echo "start:            $(meminfo)"
# Each zone runs three processes: warren-init, httpd and the sh holding the state (it
# waits on a FIFO, not a sleep loop, so no fourth).
# (It exits non-zero while a finding it cannot fix remains, e.g. one bridge's 1,023
# ports for the whole plan: the waves' own bridges answer that one; the rest is printed.)
"$W" doctor --zones "$N" --procs-per-zone 3 --net bridge --fix --json --sysctl-dir "$TMP/sysctl.d" > "$TMP/fix.json" || true
python3 - "$TMP/fix.json" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))["fix"]
for c in f["applied"]:
    print("sysctl raised for the run (restored at exit): %s %d -> %d" % (c["key"], c["from"], c["to"]))
for c, e in f["failed"]:
    print("sysctl the kernel refused: %s: %s" % (c["key"], e))
for x in json.load(open(sys.argv[1]))["report"]["findings"]:
    if x.get("verdict") not in ("ok", None):
        print("doctor after the fix: %s: %s" % (x.get("limit"), x.get("verdict")))
EOF
"$W" swap enable --zram --zram-algorithm "$ALG" --size $(( N * STATE_KIB * 3 / 2 / 1024 + 256 ))M >/dev/null
"$W" template create fleet --from-dir "$TMP/rootfs" >/dev/null
start_all=$(date +%s.%N)
: > "$TMP/running"; : > "$TMP/suspended"
for b in $(seq 0 $((WAVES - 1))); do
    lo=$(( b * WAVE + 1 )); hi=$(( (b + 1) * WAVE )); [ "$hi" -le "$N" ] || hi=$N
    n=$(( hi - lo + 1 ))
    need=$(( 1024 + n * (STATE_KIB / 1024 + 2) ))
    if [ "$(avail_mib)" -lt "$need" ]; then
        echo "stopping before wave $b: MemAvailable $(avail_mib) MiB, a wave of $n needs about $need MiB" >&2
        exit 1
    fi
    "$W" create "s$b" -t fleet --set net=bridge --set net-bridge="wfl$$b$b" --set net-subnet="10.$((200 + b)).0.0/16" \
        --set memory.max=64M \
        --set 'services=["httpd -f -p 80 -h /www", "mkfifo /run.hold; X=$(cat /www/state.txt); exec 3<>/run.hold; read -r _ <&3"]' >/dev/null
    "$W" install "s$b" >/dev/null
    NAMES=$(seq -f 'f%g' "$lo" "$hi")
    t=$(date +%s.%N); "$W" clone "s$b" $NAMES >/dev/null; tc=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))")
    t=$(date +%s.%N); "$W" boot $NAMES >/dev/null; tb=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))")
    python3 - "$WARREN_ROOT" "$lo" "$hi" > "$TMP/wave" <<'EOF'
import json, sys
root, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(lo, hi + 1):
    print(json.load(open("%s/zones/f%d/runtime.json" % (root, i)))["net"]["address"])
EOF
    # Wait until every zone of the wave serves and holds its state.
    python3 - "$TMP/wave" <<'EOF'
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
    sleep 2
    mid=$(meminfo)
    ns=$(( n * PCT / 100 ))
    SUSP=$(seq -f 'f%g' "$lo" $(( lo + ns - 1 )))
    ts=0
    if [ "$ns" -gt 0 ]; then
        t=$(date +%s.%N); "$W" suspend $SUSP >/dev/null; ts=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))")
    fi
    head -n "$ns" "$TMP/wave" >> "$TMP/suspended"
    tail -n +"$((ns + 1))" "$TMP/wave" >> "$TMP/running"
    echo "wave $b (f$lo..f$hi, bridge wfl$$b$b): clone ${tc} s, boot ${tb} s, suspend of $ns ${ts} s"
    echo "  wave running:   $mid"
    echo "  after suspend:  $(meminfo)"
done
echo "fleet up in $(python3 -c "print('%.0f s' % ($(date +%s.%N) - $start_all))"): $(wc -l < "$TMP/suspended") suspended, $(wc -l < "$TMP/running") running"
sleep 5
echo "fleet:            $(meminfo)"
"$W" list --json | python3 -c '
import json, sys
zs = [z for z in json.load(sys.stdin) if z.get("suspended")]
r = sorted(z["suspended"]["resident"] for z in zs)
print("suspended zones: %d; charged per zone median %.2f MiB, max %.2f MiB; swapped per zone median %.2f MiB" % (
    len(zs), r[len(r)//2] / 2**20, r[-1] / 2**20, sorted(z["suspended"]["swapped"] for z in zs)[len(zs)//2] / 2**20))'
printf 'interval-ms = 100\nwake-scan-s = 1.0\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n' > "$TMP/agent.toml"
"$W" agent --config "$TMP/agent.toml" > "$TMP/agent.log" 2>&1 &
AGENT=$!
# Until the agent has read the suspended zones and taken what it holds: its descriptor
# count steady for 2 s (10,000 zones take it tens of seconds).
t0=$(date +%s); prev=-1
while :; do
    sleep 2
    now=$(ls /proc/$AGENT/fd | wc -l)
    [ "$now" != "$prev" ] || break
    prev=$now
    [ $(( $(date +%s) - t0 )) -lt 300 ] || { echo "the agent's descriptors did not settle in 300 s" >&2; break; }
done
echo "agent after $(( $(date +%s) - t0 )) s: $(ps -o rss=,pcpu= -p "$AGENT" | awk '{printf "RSS %d KiB, %s %% CPU", $1, $2}'), $(ls /proc/$AGENT/fd | wc -l) descriptors"
grep 'held in one wait' "$TMP/agent.log" | tail -1 || true
python3 - "$TMP/suspended" "$TMP/running" "$SAMPLES" <<'EOF'
import socket, sys, time, threading, random
suspended = open(sys.argv[1]).read().split()
running = open(sys.argv[2]).read().split()
samples = int(sys.argv[3])
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
random.seed(1)
def sample(addrs):
    """One request to each of `addrs`: the times that answered, and the failures
    (address and error: a measurement reports them, it does not stop at the first)."""
    ok, failed = [], []
    for a in addrs:
        try:
            ok.append(get(a))
        except OSError as e:
            failed.append("%s: %s" % (a, e or type(e).__name__))
    return sorted(ok), failed
warm, warm_failed = sample(random.sample(running, min(samples, len(running))))
first, first_failed = sample(random.sample(suspended, min(samples, len(suspended))))
q = lambda v, p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
if first:
    print("first request to a suspended zone (agent wake, 100 ms ticks), %d zones: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (len(first), q(first, .5), q(first, .99), first[-1]))
if warm:
    print("a request to a running zone, %d zones: p50 %.1f ms, p99 %.1f ms" % (len(warm), q(warm, .5), q(warm, .99)))
for what, failed in (("running", warm_failed), ("suspended", first_failed)):
    if failed:
        print("FAILED requests to %s zones (30 s timeout): %d: %s" % (what, len(failed), "; ".join(failed)))
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
