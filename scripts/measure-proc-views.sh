#!/usr/bin/env bash
# The per-zone cost of /proc views (docs/proc-views.md): boots N zones with views and N
# without in a temporary state root beside a private lxcfs, and prints the boot times,
# lxcfs's memory and CPU, and the kernel's mount objects per zone. As root; removes
# every zone, the lxcfs mount and the daemon on exit, also on failure.
#   scripts/measure-proc-views.sh [N] [path/to/warren]
set -euo pipefail
N=${1:-100}
W=${2:-target/x86_64-unknown-linux-gnu/debug/warren}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
command -v lxcfs >/dev/null || { echo "needs lxcfs (apt-get install lxcfs)" >&2; exit 1; }
W=$(realpath "$W")
TMP=$(mktemp -d /tmp/warren-pv-XXXXXX)
export WARREN_ROOT=$TMP/root
mkdir -p "$WARREN_ROOT" "$TMP/lxcfs"
LXPID=
cleanup() {
    "$W" halt --all --timeout 1 >/dev/null 2>&1 || true
    for z in $(ls "$WARREN_ROOT/zones" 2>/dev/null); do "$W" delete --force "$z" >/dev/null 2>&1 || true; done
    [ -n "$LXPID" ] && kill "$LXPID" 2>/dev/null && wait "$LXPID" 2>/dev/null || true
    grep -q " $TMP/lxcfs " /proc/self/mountinfo && umount -l "$TMP/lxcfs" || true
    rm -rf "$TMP"
}
trap cleanup EXIT
lxcfs -f --enable-loadavg --enable-cfs -p "$TMP/lxcfs.pid" "$TMP/lxcfs" >/dev/null 2>&1 &
LXPID=$!
for _ in $(seq 100); do [ -e "$TMP/lxcfs/proc/meminfo" ] && break; sleep 0.1; done
echo "lxcfs-dir = \"$TMP/lxcfs\"" > "$WARREN_ROOT/defaults.toml"
"$W" template create host --from host >/dev/null
"$W" create base --set memory.max=48M >/dev/null
"$W" install base >/dev/null
rss() { awk '/^VmRSS/ {print $2}' /proc/$LXPID/status; }
cputicks() { awk '{print $14 + $15}' /proc/$LXPID/stat; }
mnt_objs() { awk '$1 == "mnt_cache" {print $2, $4}' /proc/slabinfo; }
boot_ms() { "$W" boot "$1" | sed -n 's/.*booted in \([0-9.]*\) ms.*/\1/p'; }
read -r m0 size <<<"$(mnt_objs)"
r0=$(rss)
# Alternately one zone without views and one with, so both see the same host.
off=0 on=0
for i in $(seq "$N"); do
    for v in off on; do
        "$W" clone base "$v$i" >/dev/null
        [ "$v" = off ] && "$W" config set "$v$i" proc-views=false >/dev/null
    done
    # Which boots first alternates too (the first boot after the clones is the slower).
    if [ $((i % 2)) = 0 ]; then
        off=$(echo "$off + $(boot_ms "off$i")" | bc)
        on=$(echo "$on + $(boot_ms "on$i")" | bc)
    else
        on=$(echo "$on + $(boot_ms "on$i")" | bc)
        off=$(echo "$off + $(boot_ms "off$i")" | bc)
    fi
done
off=$(echo "scale=2; $off / $N" | bc)
on=$(echo "scale=2; $on / $N" | bc)
read -r m1 _ <<<"$(mnt_objs)"
r1=$(rss)
for i in $(seq "$N"); do "$W" login "on$i" -- /bin/sh -c 'free >/dev/null; cat /proc/uptime /proc/loadavg /proc/stat /proc/cpuinfo >/dev/null'; done
r2=$(rss)
# One read of /proc/meminfo, 2000 times in one process, through lxcfs and not.
reads() { "$W" login "$1" -- /usr/bin/python3 -c 'import time
t = time.perf_counter()
for _ in range(2000): open("/proc/meminfo").read()
print(round((time.perf_counter() - t) / 2000 * 1e6, 1))'; }
us_off=$(reads off1) us_on=$(reads on1)
c0=$(cputicks); sleep 30; c1=$(cputicks)
hz=$(getconf CLK_TCK)
echo "zones: $N with views, $N without (host template, memory.max=48M, user namespaces, cgroup $([ -e /sys/fs/cgroup/cgroup.controllers ] && echo v2 || echo v1))"
echo "mean boot (warren's own timing): $off ms without views, $on ms with"
echo "mount objects per pair of zones (mnt_cache, $size B each): $(( (m1 - m0) / N )), of which the 8 views"
echo "one read of /proc/meminfo: $us_off us from the kernel, $us_on us through lxcfs"
echo "lxcfs RSS: $r0 kB idle, $r1 kB after the boots, $r2 kB after every zone read its views ($(( (r2 - r0) / N )) kB per zone)"
echo "lxcfs CPU while idle with $N zones (its loadavg thread): $(echo "scale=2; ($c1 - $c0) * 100 / $hz / 30" | bc) % of one CPU"
