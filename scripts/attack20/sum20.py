# sum20.py results.jsonl [filter]: per cell: pick, pick ASE / best λ-map ASE, EM's state in the plan (rule fired / point inside / ranked)
import json, sys, re
rows = [json.loads(l) for l in open(sys.argv[1])]
import os
TAGD = os.path.basename(sys.argv[1])[len("results"):-len(".jsonl")]
emf = sys.argv[1].replace("results", "results-em")
EMA = {}
if os.path.exists(emf):
    for l in open(emf):
        try: r = json.loads(l); EMA[r["t"]] = r["em"]["res"]["em"]["ase"]
        except Exception: pass
flt = sys.argv[2] if len(sys.argv) > 2 else ""
bad = 0; tot = 0; bad2 = 0; nem = 0
for r in rows:
    t = r["t"]
    if flt not in t: continue
    res = r["score"]["res"]; pick = res["plan"]["est"]; pa = res["plan"]["ase"]
    lam = {k: v["ase"] for k, v in res.items() if k.startswith("l")}
    bk = min(lam, key=lam.get); best = lam[bk]
    em = ""
    try:
        for l in open(f"runs{TAGD}/{t}/plan.txt"):
            if l.startswith("  a-priori em"):
                m = re.search(r"ASE (<= )?([0-9.e+-]+).*variance ([0-9.e+-]+), bias² ([0-9.e+-]+)\)(.*)", l)
                tag = m.group(5)
                em = ("UNR " if m.group(1) else "rk  ") + ("MINIMAX" if "λ = 1's prediction" in tag else ("POINT" if "point" in tag else "-")) + f" hi/var {m.group(2)}/{m.group(3)}"
                if "ordered at" in tag: em += " at " + re.search(r"ordered at ([0-9.e+-]+)", tag).group(1)
    except FileNotFoundError: pass
    emase = pa if "em" in pick else EMA.get(t)
    ratio = pa / best
    ball = min(best, emase) if emase else best
    r2 = pa / ball
    tot += 1
    flag = ("  <<1.5x" if ratio > 1.5 else "") + (f"  <<1.5x-vs-EM({r2:.2f})" if r2 > 1.5 and ratio <= 1.5 else "")
    bad += ratio > 1.5; bad2 += r2 > 1.5; nem += emase is not None
    print(f"{t:28s} pick {pick:18s} {pa:.3e} best {bk:5s} {best:.3e} ratio {ratio:5.2f} EMmeas {(emase or float('nan')):.3e} vsAll {r2:5.2f} pred {res['plan']['pred']:.3e} | EM {em}{flag}")
print(f"cells {tot}, pick beyond 1.5x of the best λ map: {bad}; EM measured on {nem}; pick beyond 1.5x of the best of λ maps and EM: {bad2}")
