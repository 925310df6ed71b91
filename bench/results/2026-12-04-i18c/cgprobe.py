# Per-cgroup kernfs cost of each v1 hierarchy a zone joins: make N empty cgroups
# beneath our own cgroup in one hierarchy, count kernfs_node_cache objects and the
# cgroup-related slab caches, remove them.
import os, sys, time
N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
own = {}
for l in open('/proc/self/cgroup'):
    _, c, p = l.rstrip('\n').split(':', 2)
    for x in c.split(','):
        own[x] = p
def slab():
    d = {}
    for l in open('/proc/slabinfo').readlines()[2:]:
        f = l.split()
        d[f[0]] = (int(f[1]), int(f[3]))
    return d
def meminfo():
    return {l.split(':')[0]: int(l.split()[1]) for l in open('/proc/meminfo')}
for h in ['memory', 'pids', 'cpuacct', 'devices']:
    base = f"/sys/fs/cgroup/{h}{own[h]}".rstrip('/') + f"/i18c-probe-{os.getpid()}"
    os.mkdir(base)
    try:
        time.sleep(0.5)
        s0, m0 = slab(), meminfo()
        for i in range(N):
            os.mkdir(f"{base}/c{i}")
        time.sleep(0.5)
        s1, m1 = slab(), meminfo()
        files = len(os.listdir(f"{base}/c0"))
        grew = sorted(((s1[k][0]-s0[k][0])*s1[k][1]/N, k, (s1[k][0]-s0[k][0])/N) for k in s1 if k in s0 and s1[k][0] > s0[k][0])
        top = [f"{k} {b/1024:.2f}KiB ({o:.1f})" for b, k, o in reversed(grew[-6:])]
        kn = (s1['kernfs_node_cache'][0]-s0['kernfs_node_cache'][0])/N
        print(f"{h}: {files} files; kernfs nodes/cgroup {kn:.1f}; Slab {(m1['Slab']-m0['Slab'])/N:.1f} KiB, Percpu {(m1['Percpu']-m0['Percpu'])/N:.1f} KiB per cgroup; top caches: {'; '.join(top)}")
    finally:
        for i in range(N):
            try: os.rmdir(f"{base}/c{i}")
            except FileNotFoundError: pass
        os.rmdir(base)
