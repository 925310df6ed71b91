import sys,os
d=sys.argv[1]; N=int(sys.argv[2])
rows=[l.split() for l in open(d+'/series')]
def mi(r): return {k.rstrip(':='):int(v) for k,v in (x.split('=') for x in r[3:])}
base=rows[0]; mx=max(int(r[2]) for r in rows)
peak=[r for r in rows if int(r[2])==mx][-1]
print(f"samples={len(rows)} peak zones={mx} (sample {peak[0]})")
b,p=mi(base),mi(peak)
print("| /proc/meminfo | base KiB | peak KiB | per zone KiB |"); print("|---|---|---|---|")
for k in ["MemAvailable","AnonPages","Shmem","Slab","SReclaimable","SUnreclaim","KernelStack","PageTables","Percpu"]:
    print(f"| {k} | {b[k]} | {p[k]} | {(p[k]-b[k])/mx:+.1f} |")
def slab(f):
    o={}
    for l in open(f).readlines()[2:]:
        x=l.split(); o[x[0]]=(int(x[2])*int(x[3]), int(x[14])*int(x[5])*4096, int(x[1]))
    return o
sb,sp=slab(f"{d}/slab.{base[0]}"),slab(f"{d}/slab.{peak[0]}")
g=sorted(((sp[k][1]-sb.get(k,(0,0,0))[1],k) for k in sp),reverse=True)
print("\n| slab cache | growth KiB | per zone bytes | objs per zone |"); print("|---|---|---|---|")
for v,k in g[:int(sys.argv[3]) if len(sys.argv)>3 else 15]:
    print(f"| {k} | {v/1024:.0f} | {v/mx:.0f} | {(sp[k][2]-sb.get(k,(0,0,0))[2])/mx:.1f} |")
