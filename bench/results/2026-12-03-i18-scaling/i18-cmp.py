import sys
def load(d):
    rows=[l.split() for l in open(d+'/series')]
    mx=max(int(r[2]) for r in rows); peak=[r for r in rows if int(r[2])==mx][-1]
    def slab(f):
        o={}
        for l in open(f).readlines()[2:]:
            x=l.split(); o[x[0]]=(int(x[1])*int(x[3]), int(x[1]))
        return o
    b,p=slab(f"{d}/slab.{rows[0][0]}"),slab(f"{d}/slab.{peak[0]}")
    return mx,{k:((p[k][0]-b.get(k,(0,0))[0])/mx,(p[k][1]-b.get(k,(0,0))[1])/mx) for k in p}
runs=[load(d) for d in sys.argv[1:]]
keys=sorted(runs[-1][1],key=lambda k:-runs[-1][1][k][0])[:22]
print("| cache (active objs × size) | "+" | ".join(f"B/zone @{n}" for n,_ in runs)+" | "+" | ".join(f"objs/zone @{n}" for n,_ in runs)+" |")
print("|---"*(1+2*len(runs))+"|")
for k in keys: print(f"| {k} | "+" | ".join(f"{r[1].get(k,(0,0))[0]:.0f}" for r in runs)+" | "+" | ".join(f"{r[1].get(k,(0,0))[1]:.1f}" for r in runs)+" |")
print("| total | "+" | ".join(f"{sum(v[0] for v in r[1].values()):.0f}" for r in runs)+" |")
