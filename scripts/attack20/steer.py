# steer.py POP N EH SEED : two real collectors get half the reports each; their states merged honestly and with
# forged-but-valid moments (every bin's devices at a corner / split on the edges / on the centres / moments dropped); score vs truth
import json, subprocess, sys, os, re, time, copy, urllib.request, numpy as np
pop, n, eh, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.chdir("/tmp/attack20/st"); R = "/tmp/attack20"
eps = eh / (2**0.5 * 20000 / 60)
pf = f"{R}/pops/{pop}-{n}-{seed}"
if not os.path.exists(pf + ".csv"):
    ro = f"{R}/pops-ro/{pop}-{n}-{seed}.csv"
    if os.path.exists(ro): os.symlink(ro, pf + ".csv")
    else: subprocess.run(["python3", f"{R}/s/gen.py", pop, str(n), str(seed), pf + ".csv"], check=True)
tf = pf + "-g61.npy"
if not os.path.exists(tf):
    ro = f"{R}/pops-ro/{pop}-{n}-{seed}-g61.npy"
    if os.path.exists(ro): os.symlink(ro, tf)
    else: subprocess.run(["python3", f"{R}/s/truth.py", pf + ".csv", tf, "0", "20000", "0", "20000", "61"], check=True)
F = np.load(tf)
rep = subprocess.run([f"{R}/geopriv", "map", "release", "--epsilon", repr(eps), "--seed", str(seed * 7919 + 3)], stdin=open(pf + ".csv"), capture_output=True, text=True).stdout.splitlines()
json.dump({"tasks": [{"id": "t", "epsilon": eps, "min_batch": 1, "period": 86400, "map": {"bbox": [0.0, 20000.0, 0.0, 20000.0], "grid": 61, "mechanism": "a-priori"}}]}, open("steer-tasks.json", "w"))
procs = {}
for c in "XY":
    for f in os.listdir("."):
        if f.startswith(f"steer{c}.db"): os.remove(f)
    procs[c] = subprocess.Popen([f"{R}/geopriv-serve", "--db", f"steer{c}.db", "--listen", "127.0.0.1:0", "--tasks", "steer-tasks.json", "--token-file", "token.txt"], stdout=open(f"steer{c}.log", "w"), stderr=subprocess.STDOUT)
time.sleep(1.5)
tok = open("token.txt").read().strip(); states = {}
try:
    half = len(rep) // 2
    for c, part in (("X", rep[:half]), ("Y", rep[half:])):
        addr = re.search(r"listening on (\S+)", open(f"steer{c}.log").read()).group(1)
        for i in range(0, len(part), 1000):
            urllib.request.urlopen(urllib.request.Request(f"http://{addr}/v1/tasks/t/reports", data="\n".join(part[i:i+1000]).encode(), headers={"Content-Type": "application/x-ndjson"}, method="POST")).read()
        states[c] = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://{addr}/v1/tasks/t/state", headers={"Authorization": "Bearer " + tok})).read())
finally:
    for p in procs.values(): p.terminate()
X, Y = states["X"], states["Y"]
h, hh = 2**31, 2**62
def forge(s, kind):
    s = copy.deepcopy(s); m = s["periods"][0]["map"]
    if "moments" not in m and kind != "drop": return None
    b = m["bins"]
    if kind.startswith("corner") and kind != "corner":
        frac = float(kind[6:]) / 100; top = set(i for i, c in sorted(b, key=lambda r: -r[1])[:max(1, int(frac * len(b)))])
        old = {r[0]: r for r in m.get("moments", [])}
        m["moments"] = [[i, str(c*h), str(c*h), str(c*hh), str(c*hh), str(c*hh)] if i in top else old[i] for i, c in b if i in top or i in old]
    if kind == "corner": m["moments"] = [[i, str(c*h), str(c*h), str(c*hh), str(c*hh), str(c*hh)] for i, c in b]
    if kind == "split": m["moments"] = [[i, "0", "0", str(c*hh), str(c*hh), "0"] for i, c in b]
    if kind == "centres": m["moments"] = []
    if kind == "drop": m.pop("moments", None)
    return s
out = []
for kind in os.environ.get("KINDS", "honest corner split centres drop").split():
    xs = [X, Y] if kind == "honest" else [forge(X, kind), Y]
    if xs[0] is None: out.append(f"{kind}: (no moments at this eh)"); continue
    for i, s in enumerate(xs): json.dump(s, open(f"steer-s{i}.json", "w"))
    p = subprocess.run([f"{R}/geopriv-serve", "merge", "--tasks", "steer-tasks.json", "--task", "t", "steer-s0.json", "steer-s1.json"], capture_output=True, text=True)
    if p.returncode: out.append(f"{kind}: rc {p.returncode} {p.stderr[:100]}"); continue
    m = json.loads(p.stdout.splitlines()[0])["map"]
    v = np.array([np.nan if x is None else x for x in m["values"]])
    out.append(f"{kind}: {m['estimator']}/{m['lambda']} ASE {np.mean((v-F)**2):.3e}")
print(f"{pop}-{n}-{eh:g}-{seed} (one shard of two forged): " + " | ".join(out), flush=True)
