import geopriv as g, struct, json
from geopriv import *
pol=BudgetPolicy(unit=BudgetUnit.PER_DOLLAR,total_epsilon=1.0,total_delta=0.0)
L=PrivacyLedger.in_memory(pol)
q=GeoQuery.threshold(100000.0,20000.0)
m=GeoMechanism.polyplace(1e-4).with_unit(BudgetUnit.PER_DOLLAR)
ms=m.seeded(7)
print('mech seeded', ms.is_seeded())
for name,mm in [('secure',m),('seeded',ms)]:
    r=mm.privatize(L,q,[90000.0]); print(name,'privatize', json.loads(r.json).get('seeded'))
    r=mm.privatize_to_outbox if False else None
    a=mm.privatize_packed(L,q,struct.pack('<2d',90000.0,1.0)); print(name,'packed', a.seeded(), [json.loads(a.report_json(i)).get('seeded') for i in range(2)])
    for inst in [None, 0.5]:
        mr=MemoizedRelease(mm,5000.0,inst); rep=mr.release(L,q,[90000.0])
        print(name,'memo inst',inst, [a for a in dir(rep) if not a.startswith('_')], )
        print('   ', rep.report.json if hasattr(rep,'report') else rep)
    mp=MapRelease(MapGrid(xmin=0.0,xmax=1000.0,ymin=0.0,ymax=1000.0,points=11,bandwidth=100.0) if False else None, None, 1.0) if False else None
