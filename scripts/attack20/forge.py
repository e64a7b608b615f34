# forge.py : hostile partial states on `geopriv-serve merge` (attack20 item 2). Needs stateA.json, stateB.json, tasks.json, truth.npy
import json, subprocess, time, copy, sys, os, numpy as np, resource
A = json.load(open("stateA.json")); B = json.load(open("stateB.json"))
F = np.load("truth.npy")
G = os.environ.get("GS", "../geopriv-serve")
def rows(s): return s["periods"][0]["map"]["moments"]
def bins(s): return dict(map(tuple, s["periods"][0]["map"]["bins"]))
I128, N128 = 2**127 - 1, -2**127
def run(name, states, raw=None):
    fs = []
    for i, s in enumerate(states):
        f = f"f_{i}.json"
        with open(f, "w") as fh: fh.write(s if isinstance(s, str) else json.dumps(s))
        fs.append(f)
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", G, "merge", "--tasks", "tasks.json", "--task", "atoms"] + fs, capture_output=True, text=True)
    el = time.time() - t0
    err = p.stderr.strip().splitlines()
    tm = err[-1] if err else ""
    msg = " | ".join(err[:-1])[:110]
    out = ""
    if p.returncode == 0:
        m = json.loads(p.stdout.splitlines()[0])["map"]
        v = np.array([np.nan if x is None else x for x in m["values"]])
        out = f"ACCEPT pick {m['estimator']}/{m['lambda']} ASE {np.mean((v-F)**2):.3e}"
    else:
        out = f"rc {p.returncode}: {msg}"
    panic = "panick" in p.stderr
    print(f"{name:26s} {out}  [{tm} s/s/s/KB]{'  PANIC' if panic else ''}", flush=True)
def with_rows(r, base=A):
    s = copy.deepcopy(base); s["periods"][0]["map"]["moments"] = r; return s
r = rows(A); b = bins(A); r0 = r[0]; c0 = b[r0[0]]
run("honest A+B", [A, B])
run("honest A only", [A])
# non-canonical / malformed strings
for nm, v in [("plus", "+1"), ("lead0", "01"), ("negzero", "-0"), ("space", " 1"), ("exp", "1e3"), ("hex", "0x10"), ("empty", ""), ("minus", "-"),
              ("arabic", "\u0661"), ("fullwidth", "\uff11"), ("41 chars", "1" + "0"*40), ("i128max", str(I128)), ("i128min", str(N128)),
              ("over", str(2**127)), ("under", str(-2**127 - 1)), ("nul", "1\u0000"), ("float", "1.0"), ("underscore", "1_0")]:
    run(f"str {nm}", [with_rows([[r0[0], v] + r0[2:]] + r[1:]), B])
# types
for nm, row in [("num_not_str", [r0[0], 1, 2, 3, 4, 5]), ("idx_str", [str(r0[0])] + r0[1:]), ("idx_float", [r0[0] + 0.0] + r0[1:]),
                ("idx_neg", [-1] + r0[1:]), ("idx_2^64", [2**64] + r0[1:]), ("short", r0[:5]), ("long", r0 + ["0"]), ("obj", {"i": r0[0]}), ("null_el", [r0[0], None] + r0[2:])]:
    raw = json.dumps(with_rows([row] + r[1:])).replace(f"[{float(r0[0])},", f"[{r0[0]}.0,")
    run(f"row {nm}", [raw, B])
# structure
run("moments null", [with_rows(None), B])
run("moments {}", [with_rows({}), B])
run("moments [] (all centres)", [with_rows([]), B])
run("dup row", [with_rows([r0, r0] + r[1:]), B])
run("unsorted", [with_rows(list(reversed(r))), B])
nb = 365*365
empty_bin = next(i for i in range(nb) if i not in b)
run("row on empty bin", [with_rows(sorted([[empty_bin, "1", "0", "1", "0", "0"]] + r, key=lambda x: x[0])), B])
run("row idx = len", [with_rows(r + [[nb, "0", "0", "0", "0", "0"]]), B])
run("all-zero row", [with_rows([[r0[0], "0", "0", "0", "0", "0"]] + r[1:]), B])
# duplicate JSON key
sA = json.dumps(A); i = sA.index('"moments"')
run("dup key moments", [sA[:i] + '"moments":[],' + sA[i:], B])
# bounds at the edge (bin count c0)
h, hh = 2**31, 2**62
run("edge: corner, valid", [with_rows([[r0[0], str(c0*h), str(c0*h), str(c0*hh), str(c0*hh), str(c0*hh)]] + r[1:]), B])
run("edge+1 Σq", [with_rows([[r0[0], str(c0*h+1), "0", str(c0*hh), "0", "0"]] + r[1:]), B])
run("edge+1 Σq²", [with_rows([[r0[0], "0", "0", str(c0*hh+1), "0", "0"]] + r[1:]), B])
run("CS+1", [with_rows([[r0[0], "0", "0", "4", "9", "7"]] + r[1:]), B])
run("CS edge", [with_rows([[r0[0], "0", "0", "4", "9", "6"]] + r[1:]), B])
run("neg var", [with_rows([[r0[0], "2", "0", "3", "0", "0"]] + r[1:]) if c0 == 1 else with_rows([[r0[0], str(c0*2), "0", str(c0*4 - 1), "0", "0"]] + r[1:]), B])
run("Σq0q1 = i128min", [with_rows([[r0[0], "0", "0", str(c0*hh), str(c0*hh), str(N128)]] + r[1:]), B])
# every bin at the maximum (all devices at a corner / split at edges)
allmax = [[i, str(c*h), str(c*h), str(c*hh), str(c*hh), str(c*hh)] for i, c in sorted(b.items())]
allsplit = [[i, "0", "0", str(c*hh), str(c*hh), "0"] for i, c in sorted(b.items())]
Bb = bins(B)
run("steer: all corner (A)", [with_rows(allmax), B])
run("steer: all split (A)", [with_rows(allsplit), B])
run("steer: all split (A,B)", [with_rows(allsplit), with_rows([[i, "0", "0", str(c*hh), str(c*hh), "0"] for i, c in sorted(Bb.items())], B)])
run("steer: centres (A,B)", [with_rows([]), with_rows([], B)])
run("mix: A, B w/o moments", [A, with_rows(None, B)])
noB = with_rows(None, B); del noB["periods"][0]["map"]["moments"]
run("mix: A, B field absent", [A, noB])
run("mix: B absent, A", [noB, A])
run("mix: A, B absent, A'", [A, noB, A])
