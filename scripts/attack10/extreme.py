import geopriv as g, struct, json, math, sys, signal
from geopriv import *
signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError()))
EPS=[0.0,5e-324,1e-300,1e-12,1e300,1.7976931348623157e308,float('nan'),float('inf'),-1.0,-0.0]
q1=GeoQuery.threshold(100000.0,20000.0)
res={'ok':0,'err':0,'timeout':0,'other':0}
bad=[]
def run(label,f):
    signal.alarm(20)
    try:
        r=f(); signal.alarm(0)
        # check every released value is finite and the ledger within budget
        res['ok']+=1; return r
    except GeoprivError as e:
        signal.alarm(0); res['err']+=1; return e
    except TimeoutError:
        res['timeout']+=1; bad.append((label,'timeout')); return None
    except Exception as e:
        signal.alarm(0); res['other']+=1; bad.append((label,repr(e)[:200])); return e
def check_report(label,js,L,total):
    d=json.loads(js)
    v=d.get('value')
    if v is None or (isinstance(v,float) and not math.isfinite(v)):
        bad.append((label,'value '+js[:200]))
    st=L.status()
    sp=json.loads(L.to_json())
    if json.loads(L.to_json()).get('releases',0)<1: bad.append((label,'released but no charge'))
ctors=['polyplace','laplace','cauchy','student_t','noise_a_priori','local_dp','global_laplace']
for c in ctors:
    for e in EPS:
        for tot in [1.0, 1e300, 5e-324]:
            def f():
                fn=getattr(GeoMechanism,c)
                m=fn(e,0.0) if c=='laplace' else fn(e)
                unit=BudgetUnit.LOCAL_DP if c=='local_dp' else BudgetUnit.PER_DOLLAR
                if c!='local_dp': m=m.with_unit(unit)
                L=PrivacyLedger.in_memory(BudgetPolicy(unit=unit,total_epsilon=tot,total_delta=0.0))
                outs=[]
                for x in [90000.0, 1e308, -1e308, 0.0]:
                    try:
                        r=m.privatize(L,q1,[x]); outs.append(r.json); check_report(f'{c} e={e} tot={tot} x={x}',r.json,L,tot)
                    except GeoprivError as ex: outs.append(type(ex).__name__)
                sp=json.loads(L.to_json())
                if sp.get('releases')!=sum(1 for o in outs if o.startswith('{')):
                    bad.append((f'{c} {e} {tot}','released != recorded', sp.get('releases'), outs))
                return outs
            run(f'{c} e={e} tot={tot}',f)
print(res); print(len(bad)); [print(b) for b in bad[:30]]
