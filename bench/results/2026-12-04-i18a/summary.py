#!/usr/bin/env python3
"""One row per run in /tmp/i18am (or the dir given): the demo's figures, per-zone
kernel memory at the peak from the samples, kmalloc-1k objects per zone, the shrinker
probe, and the superblocks one zone made (devices in its mountinfo the host has not)."""
import sys, os, re
base = sys.argv[1] if len(sys.argv) > 1 else "/tmp/i18am"
def devs(f):
    out = []
    for l in open(f):
        x = l.split(' '); d = x.index('-'); out.append((x[4], x[2], x[d+1]))
    return out
def mi(r): return {k.rstrip(':='): int(v) for k, v in (x.split('=') for x in r[3:])}
def slab(f):
    o = {}
    for l in open(f).readlines()[2:]:
        x = l.split(); o[x[0]] = int(x[1])
    return o
print("| run | zones at peak | superblocks/zone (mounts) | clone med/p99 ms | boot med/p99 ms | halt med/p99 ms | host MiB/zone | MemAvail drop MiB/zone | Slab KiB/zone | SUnreclaim KiB/zone | kmalloc-1k objs/zone | probe before→after | total s | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for name in sorted((n for n in os.listdir(base) if os.path.isdir(f"{base}/{n}")), key=lambda n: (int(re.sub(r'\D', '', n) or 0), n)):
    d = f"{base}/{name}"
    if not os.path.exists(f"{d}/demo.txt"): continue
    t = open(f"{d}/demo.txt").read()
    def m(k):
        r = re.search(rf"^{re.escape(k)}\s+([\d.]+) \S+\s+([\d.]+|-)", t, re.M)
        return f"{r.group(1)}/{r.group(2)}" if r else "?"
    def one(k):
        r = re.search(rf"^\s*{re.escape(k)}\s+(-?[\d.]+)", t, re.M); return r.group(1) if r else "?"
    tot = re.search(r"total ([\d.]+) s", t)
    rows = [l.split() for l in open(f"{d}/series")]
    mx = max(int(r[2]) for r in rows)
    peak = [r for r in rows if int(r[2]) == mx][-1]
    b, p = mi(rows[0]), mi(peak)
    sb0, sbp = slab(f"{d}/slab.{rows[0][0]}"), slab(next(f"{d}/{x}" for x in os.listdir(d) if x.startswith("slab.peak")) if not os.path.exists(f"{d}/slab.{peak[0]}") else f"{d}/slab.{peak[0]}")
    k1 = (sbp["kmalloc-1k"] - sb0["kmalloc-1k"]) / mx if mx else 0
    sbz = "?"
    if os.path.exists(f"{d}/mountinfo.zone") and os.path.getsize(f"{d}/mountinfo.zone"):
        z = devs(f"{d}/mountinfo.zone"); h = {dd for _, dd, _ in devs(f"{d}/mountinfo.host")}
        made = sorted({t_ for _, dd, t_ in z if dd not in h})
        sbz = f"{len(made)}+mqueue: {','.join(made)} ({len(z)})"
    pr = lambda f: open(f"{d}/{f}").read().split()[-1]
    load = open(f"{d}/uptime").read().split("load average:")[1].split(",")[0].strip()
    print(f"| {name} | {mx} | {sbz} | {m('clone')} | {m('boot')} | {m('halt')} | {one('host memory per zone')} | {one('(MemAvailable drop)')} | {(p['Slab']-b['Slab'])/mx:.0f} | {(p['SUnreclaim']-b['SUnreclaim'])/mx:.0f} | {k1:.0f} | {pr('probe.before')}→{pr('probe.after')} | {tot.group(1) if tot else '?'} | {load} |")
