import geopriv as g, os, json, struct, subprocess
from geopriv import BudgetPolicy, BudgetUnit, PrivacyLedger, GeoMechanism, GeoQuery
path='/tmp/a10/packed.json'
for f in [path, '/tmp/a10/.packed.json.lock']:
    if os.path.exists(f): os.remove(f)
pol=BudgetPolicy(unit=BudgetUnit.PER_DOLLAR,total_epsilon=15e-4,total_delta=0.0)
a=PrivacyLedger.open_or_create(path,pol)   # process A's view: 0 spent
b=PrivacyLedger.open(path,pol)
m=GeoMechanism.polyplace(1e-4).with_unit(BudgetUnit.PER_DOLLAR)
q=GeoQuery.threshold(100000.0,20000.0)
# B (could be another process) spends 10
xs=struct.pack('<10d',*([90000.0]*10))
rb=m.privatize_packed(b,q,xs); print('B released', rb.len())
try:
    ra=m.privatize_packed(a,q,xs); print('A released', ra.len())
except g.GeoprivError as e:
    print('A refused:', type(e).__name__, e)
d=json.load(open(path)); print('recorded releases', d['releases'])
