import re,sys,glob
def an(f):
    cur=None; rows=[]
    for l in open(f):
        if re.match(r'^[0-9a-f]+-[0-9a-f]+ ',l):
            parts=l.split(); a,b=[int(x,16) for x in parts[0].split('-')]
            cur={'size':(b-a)//1024,'perm':parts[1],'name':parts[5] if len(parts)>5 else '','f':{}}; rows.append(cur)
        elif cur is not None:
            k,_,v=l.partition(':'); v=v.split()
            if v and v[0].isdigit(): cur['f'][k]=int(v[0])
    c={'relro/data(bin)':0,'heap':0,'stacks(2M)':0,'stack':0,'other':0}; nst=0
    for r in rows:
        an=r['f'].get('Anonymous',0)
        if not an: continue
        if r['name'].startswith('/'): c['relro/data(bin)']+=an
        elif r['name']=='[heap]': c['heap']+=an
        elif r['name']=='[stack]': c['stack']+=an
        elif r['size']>=1024: c['stacks(2M)']+=an; nst+=1
        else: c['other']+=an
    c['total']=sum(v for k,v in c.items()); c['nstacks']=nst
    return c
for f in sys.argv[1:]:
    print(f, an(f))
