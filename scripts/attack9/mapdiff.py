# MapServer (bindings) vs `geopriv map aggregate` on the same hostile stream (replays spelled differently, hostile lines).
import geopriv, json, random, subprocess
from geopriv import MapServer, MapGrid, MapMechanism
random.seed(4)
E = 0.0021213204371192894
good = [l.strip() for l in open("/tmp/ms3-rep-1.jsonl").readlines()[:30000]]
def esc(s): return "".join("\\u%04x" % ord(c) if random.random() < .5 else c for c in s)
rows = list(good)
for _ in range(3000):
    l = random.choice(good); X = json.loads(l)["report_id"]
    rows.insert(random.randrange(len(rows)+1), random.choice([l, l.replace(X, X.upper()), l.replace(X, esc(X)), "\ufeff"+l, l.replace('"report_id"','"report\\u005fid"')]))
for h in ["{}", "null", "[1,2]", good[0][:-4], "\x1b[2J", good[1].replace("a_priori","sampled")] * 20:
    rows.insert(random.randrange(len(rows)+1), h)
grid = MapGrid(x_min=0.0, x_max=20000.0, y_min=0.0, y_max=20000.0, points_x=61, points_y=61, bandwidth=None)
s = MapServer(grid, MapMechanism.A_PRIORI, E)
b = s.add_all_json(rows)
est = s.estimate(1.0)
cli = subprocess.run(["/tmp/attack9/geopriv", "map", "aggregate", "--epsilon", repr(E), "--lambda", "1"], input=("\n".join(rows)+"\n").encode(), capture_output=True)
m = json.loads(cli.stdout)
mm = m.get("map", m)
vals = mm.get("values") if isinstance(mm, dict) else None
print("bindings: accepted", b.accepted, "dup", b.duplicates, "rejected", b.rejected, "| CLI stderr:", cli.stderr.decode().strip().splitlines()[-2:])
flat = [v for row in est.values for v in row] if isinstance(est.values[0], list) else list(est.values)
cflat = [v for row in vals for v in row] if vals and isinstance(vals[0], list) else vals
print("cells", len(flat), len(cflat) if cflat else None, "bit-equal:", cflat is not None and all(a == b for a, b in zip(flat, cflat)) and len(flat) == len(cflat))
