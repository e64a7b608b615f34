# Hostile partial map states through the Python bindings (MapServer.from_json), against branch state25.
# Run after bindings/scripts/test-python.sh has built target/geopriv-ffi-tests/python: python3 scripts/lead17/hostile_states.py
import json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/geopriv-ffi-tests/python"))
from geopriv_ffi import MapGrid, MapMechanism, MapRelease, MapServer, GeoprivError
grid = MapGrid(x_min=0.0, x_max=10_000.0, y_min=0.0, y_max=10_000.0, points_x=9, points_y=9, bandwidth=None)
eps = 1.0
dev = MapRelease(grid, MapMechanism.A_PRIORI(), eps)
lines = [dev.release_unmetered([1000.0 + 27.3 * i, 5000.0 + 11.1 * (i % 7)]).json for i in range(300)]
m = MapServer(grid, MapMechanism.A_PRIORI(), eps)
m.add_all_json(lines)
s = json.loads(m.to_json())
def find(o, path=()):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "moments": return path + (k,)
            r = find(v, path + (k,))
            if r: return r
    return None
p = find(s)
print("moments path", p)
def get(o, p):
    for k in p: o = o[k]
    return o
def setp(o, p, v):
    for k in p[:-1]: o = o[k]
    o[p[-1]] = v
mom = get(s, p)
print("rows", len(mom), "first", mom[0])
I128 = str(2**127 - 1); NI128 = str(-2**127)
cases = {}
r0 = mom[0]
cases["i128max_all"] = [[r0[0]] + [I128]*5] + mom[1:]
cases["i128min_all"] = [[r0[0]] + [NI128]*5] + mom[1:]
cases["over_i128"] = [[r0[0]] + [str(2**127)]*5] + mom[1:]
cases["dup_bin"] = [r0, r0] + mom[1:]
cases["bin_neg"] = [[-1] + r0[1:]] + mom[1:]
cases["bin_huge"] = [[2**64] + r0[1:]] + mom[1:]
cases["bin_float"] = [[r0[0] + 0.5] + r0[1:]] + mom[1:]
cases["num_not_str"] = [[r0[0], 1, 2, 3, 4, 5]] + mom[1:]
cases["short_row"] = [r0[:3]] + mom[1:]
cases["long_row"] = [r0 + ["0"]] + mom[1:]
cases["plus"] = [[r0[0], "+1"] + r0[2:]] + mom[1:]
cases["lead0"] = [[r0[0], "01"] + r0[2:]] + mom[1:]
cases["negzero"] = [[r0[0], "-0"] + r0[2:]] + mom[1:]
cases["exp"] = [[r0[0], "1e3"] + r0[2:]] + mom[1:]
cases["bigdigits"] = [[r0[0], "9"*100000] + r0[2:]] + mom[1:]
cases["unsorted"] = list(reversed(mom))
cases["null"] = None
cases["obj"] = {"a": 1}
cases["empty"] = []
cases["neg_second"] = [[r0[0], r0[1], r0[2], "-1", r0[4], r0[5]]] + mom[1:]
cases["cs_violate"] = [[r0[0], "0", "0", "1", "1", str(10**6)]] + mom[1:]
cases["huge_array"] = [[i, "0", "0", "0", "0", "0"] for i in range(2_000_000)]
res = {}
for k, v in cases.items():
    t = json.loads(json.dumps(s)); setp(t, p, v)
    t0 = time.time()
    try:
        MapServer.from_json(json.dumps(t)); res[k] = "ACCEPTED"
    except GeoprivError as e:
        res[k] = "refused: " + str(e)[:90]
    except Exception as e:
        res[k] = "OTHER " + type(e).__name__ + " " + str(e)[:80]
    res[k] += f" ({time.time()-t0:.2f}s)"
for k, v in res.items(): print(f"{k:14s} {v}")
# a valid forgery: all offsets at the bin's max |q| consistent with counts? try zeroing moments (all on centres)
t = json.loads(json.dumps(s)); setp(t, p, [])
try:
    r = MapServer.from_json(json.dumps(t)); print("zeroed moments accepted (all devices on bin centres): valid by the bounds")
except GeoprivError as e: print("zeroed refused", e)
