import json, random, math, os
from geopriv import *
path='/tmp/a10/longi.json'
for f in [path,'/tmp/a10/.longi.json.lock']:
    if os.path.exists(f): os.remove(f)
pol=BudgetPolicy(unit=BudgetUnit.PER_DOLLAR,total_epsilon=1e-3,total_delta=0.0)
L=PrivacyLedger.open_or_create(path,pol)
q=GeoQuery.threshold(100000.0,20000.0)
m=GeoMechanism.polyplace(1e-4).with_unit(BudgetUnit.PER_DOLLAR)
mr=MemoizedRelease(m,5000.0,None)
# 3 years of daily reports, income random-walks; restarts (new handles) every 30 days
random.seed(1); x=90000.0; sent=[]; charged=0; refused=0; cells=set()
for day in range(3*365):
    if day%30==0: L=PrivacyLedger.open(path,pol); mr=MemoizedRelease(m,5000.0,None)
    x+=random.gauss(0,800)
    try:
        r=mr.release(L,q,[x]); sent.append(json.loads(r.report.json)['value']); charged+=r.charged
    except GeoprivError as e:
        refused+=1; sent.append(None)
st=json.loads(L.to_json())
print('days',3*365,'charged',charged,'recorded',st['releases'],'refused',refused,'distinct values sent',len(set(v for v in sent if v is not None)))
# other paths on the same ledger: another width, another query, unmemoized, packed
import struct
for label,f in [('width 5001',lambda: MemoizedRelease(m,5001.0,None).release(L,q,[x])),
                ('other query',lambda: MemoizedRelease(m,5000.0,None).release(L,GeoQuery.threshold(50000.0,20000.0),[x])),
                ('plain',lambda: m.privatize(L,q,[x])),
                ('packed',lambda: m.privatize_packed(L,q,struct.pack('<d',x))),
                ('inst layer',lambda: MemoizedRelease(m,5000.0,0.5).release(L,q,[x])),
                ('seeded',lambda: MemoizedRelease(m.seeded(3),5000.0,None).release(L,q,[x+123456])),
               ]:
    try: r=f(); print(label,'released', getattr(r,'charged',None))
    except GeoprivError as e: print(label,'refused',type(e).__name__)
st=json.loads(L.to_json()); print('final recorded',st['releases'],'spent',st['spent_epsilon'])
