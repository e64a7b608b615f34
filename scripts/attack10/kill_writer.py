import sys, os, struct, random, json
import geopriv as g
from geopriv import *
path, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pol = BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=0.1, total_delta=0.0)
L = PrivacyLedger.open_or_create(path, pol)
q = GeoQuery.kde([0.0, 0.0], 1000.0)
m = GeoMechanism.polyplace(1e-3).with_unit(BudgetUnit.PER_METRE)
grid = MapGrid(x_min=0.0, x_max=20000.0, y_min=0.0, y_max=20000.0, points_x=31, points_y=31, bandwidth=None)
mr = MapRelease(grid, MapMechanism.A_PRIORI, 1e-3)
memo = MemoizedRelease(m, 500.0, None)
refused = 0
for i in range(n):
    try:
        if kind == 'one':
            r = m.privatize(L, q, [random.uniform(-3000, 3000), 10.0]); c = 1
        elif kind == 'packed':
            r = m.privatize_packed(L, q, struct.pack('<6d', *[random.uniform(0, 100) for _ in range(6)])); c = r.len()
        elif kind == 'map':
            r = mr.release(L, [random.uniform(0, 20000), random.uniform(0, 20000)]); c = 1
        elif kind == 'memo':
            r = memo.release(L, q, [random.choice([0.0, 600.0, 1200.0, 1800.0, 2400.0, 3000.0]), 0.0]); c = 1 if r.charged else 0
        elif kind == 'outbox':
            r = m.privatize_to_outbox(L, q, [1.0, 2.0]); c = 1
        sys.stdout.write(f"{kind} {c}\n"); sys.stdout.flush()
    except GeoprivError as e:
        name = type(e).__name__
        if name not in ('BudgetExceeded', 'LedgerBusy'):
            sys.stdout.write(f"ERR {name} {e}\n"); sys.stdout.flush()
        refused += 1
        if refused > 5 and name == 'BudgetExceeded':
            break
