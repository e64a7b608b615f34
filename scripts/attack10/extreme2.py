import geopriv as g, struct, json, math, signal, time, resource
from geopriv import *
signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError()))
res={'ok':0,'err':0}; bad=[]
def run(label,f,t=30):
    signal.alarm(t); t0=time.time()
    try:
        r=f(); signal.alarm(0); res['ok']+=1
        if time.time()-t0>5: bad.append((label,'slow %.1fs'%(time.time()-t0)))
        return r
    except GeoprivError as e: signal.alarm(0); res['err']+=1; return e
    except TimeoutError: bad.append((label,'timeout'))
    except Exception as e: signal.alarm(0); bad.append((label,repr(e)[:200]))
def fin(label,js,key='value'):
    d=json.loads(js)
    for k in ('value','location','values'):
        v=d.get(k)
        if v is None: continue
        vs=v if isinstance(v,list) else [v]
        if any((not isinstance(a,(int,float))) or not math.isfinite(a) for a in vs): bad.append((label,'nonfinite '+js[:150]))
EPS=[5e-324,1e-300,1e-12,1e300,1.7976931348623157e308,float('nan'),float('inf'),0.0]
# Map releases: grids and eps extremes
grids=[(0.0,20000.0,61,None),(0.0,1e-300,3,None),(-1e300,1e300,3,None),(0.0,1.0,2,1e-300),(0.0,1.0,2,1e300),(0.0,20000.0,2**16,None),(0.0,20000.0,2**31,None),(0.0,20000.0,1,None),(0.0,20000.0,0,None)]
for (a,b,n,bw) in grids:
    for e in EPS:
        for mech in [MapMechanism.A_PRIORI,MapMechanism.SAMPLED(k=3),MapMechanism.SAMPLED(k=2**31),MapMechanism.COMPOSITION,MapMechanism.VECTOR_LAPLACE]:
            def f():
                grid=MapGrid(x_min=a,x_max=b,y_min=a,y_max=b,points_x=n,points_y=n,bandwidth=bw)
                r=MapRelease(grid,mech,e)
                L=PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_METRE,total_epsilon=1e300,total_delta=0.0))
                out=0
                for loc in [[a,a],[b,b],[(a+b)/2,(a+b)/2]]:
                    try:
                        u=r.release(L,loc); fin(f'map {a},{b},{n},{bw},{e},{mech}',u.json); out+=1
                    except GeoprivError: pass
                rel=json.loads(L.to_json())['releases']
                if rel!=out: bad.append((f'map {a},{b},{n},{bw},{e},{mech}','released',out,'recorded',rel))
            run(f'map {a},{b},{n},{bw},{e},{mech}',f)
# memo widths
q=GeoQuery.threshold(100000.0,20000.0)
for w in [5e-324,1e-300,1e300,1.7976931348623157e308,float('nan'),float('inf'),0.0,-1.0]:
    for inst in [None,5e-324,1e300,float('nan'),0.0]:
        for x in [0.0,1e308,-1e308,90000.0]:
            def f():
                L=PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR,total_epsilon=1.0,total_delta=0.0))
                mr=MemoizedRelease(GeoMechanism.polyplace(1e-4).with_unit(BudgetUnit.PER_DOLLAR),w,inst)
                r1=mr.release(L,q,[x]); fin(f'memo w={w} inst={inst} x={x}',r1.report.json)
                r2=mr.release(L,q,[x])
                if json.loads(L.to_json())['releases']!=1: bad.append((f'memo w={w} inst={inst} x={x}','charges',json.loads(L.to_json())['releases']))
                if inst is None and json.loads(r1.report.json)['value']!=json.loads(r2.report.json)['value']: bad.append((f'memo w={w} x={x}','not memoized'))
            run(f'memo w={w} inst={inst} x={x}',f)
# periods
for s in [0,1,2**63,2**64-1]:
    for pe in [0.0,5e-324,1.0,2.0,float('nan')]:
        def f():
            L=PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR,total_epsilon=1.0,total_delta=0.0,period=BudgetPeriod(seconds=s,epsilon=pe,delta=0.0)))
            m=GeoMechanism.polyplace(0.25).with_unit(BudgetUnit.PER_DOLLAR); k=0
            for i in range(10):
                try: m.privatize(L,q,[1.0]); k+=1
                except GeoprivError: pass
            if k>4: bad.append((f'period s={s} pe={pe}','released',k))
            if k>round(min(pe,1.0)/0.25): bad.append((f'period s={s} pe={pe}','over period',k))
        run(f'period s={s} pe={pe}',f)
print(res, 'maxrss MB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024); print(len(bad)); [print(b) for b in bad[:40]]
