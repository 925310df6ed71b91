# Aggregate a `perf script -F comm,tid,time,trace,ip,sym` of sched:sched_switch:
# per warren-init tid, its life in the window (first to last event) and its off-CPU
# time by stack (R = runnable-preempted, D/S = sleeping); then the slowest 1 %.
import sys, re, collections
SKIP = {'__schedule','schedule','__cond_resched','schedule_timeout','io_schedule','preempt_schedule_common','schedule_preempt_disabled','preempt_schedule','preempt_schedule_irq','io_schedule_timeout','rwsem_down_write_slowpath','rwsem_down_read_slowpath','__mutex_lock','mutex_lock'}
hdr = re.compile(r'^\s*(\S.*?)\s+(\d+)\s+([\d.]+): prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)')
out = {}        # tid -> (time, state, stack)
life = {}       # tid -> [first, last]
off = collections.defaultdict(lambda: collections.defaultdict(float))  # tid -> stack -> secs
comm_of = {}
cur = None
def flush(c):
    if not c: return
    t, tid, comm, state, nxt, frames = c
    key = ' < '.join([f for f in frames if f not in SKIP][:4])
    if tid in out:
        pass
    out[tid] = (t, state, key)
    comm_of[tid] = comm
    life.setdefault(tid, [t, t])[1] = t
    if nxt in out:
        t0, st, k = out.pop(nxt)
        off[nxt][st[0] + ' ' + k] += t - t0
        life.setdefault(nxt, [t0, t])[1] = t
for line in open(sys.argv[1]):
    m = hdr.match(line)
    if m:
        flush(cur)
        cur = [float(m.group(3)), int(m.group(5)), m.group(4), m.group(6), int(m.group(8)), []]
    elif cur is not None and line.strip():
        parts = line.split()
        if len(parts) >= 2:
            cur[5].append(parts[1])
flush(cur)
inits = [t for t in life if comm_of.get(t) == 'warren-init']
durs = sorted(((life[t][1] - life[t][0]), t) for t in inits)
n = len(durs)
print(f'warren-init tids: {n}; life in window (ms): median {durs[n//2][0]*1e3:.1f}, p90 {durs[int(n*.9)][0]*1e3:.1f}, p99 {durs[int(n*.99)][0]*1e3:.1f}, max {durs[-1][0]*1e3:.1f}')
def agg(tids):
    a = collections.defaultdict(float)
    for t in tids:
        for k, v in off[t].items(): a[k] += v
    return a
for label, sel in (('all inits', [t for _, t in durs]), ('slowest 1 %', [t for _, t in durs[int(n*.99):]])):
    a = agg(sel)
    tot = sum(a.values())
    print(f'\n{label}: {len(sel)} inits, off-CPU {tot*1e3/len(sel):.1f} ms per init on average; by stack (ms per init):')
    for k, v in sorted(a.items(), key=lambda kv: -kv[1])[:14]:
        print(f'  {v*1e3/len(sel):7.2f}  {k}')
