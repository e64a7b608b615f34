import sys, json
# per cell: ranked predictions vs measured (EM, λ=1 vs debiased, λ=0 vs plain) for lead19 (new) and base; picks
rows = [json.loads(l) for l in open(sys.argv[1])]
meas_of = {"a-priori em": "em", "a-priori λ=1.0": "debiased", "a-priori λ=0.0": "plain"}
nmiss = {"new": 0, "base": 0}; nchg = 0; npk = {"new": 0, "base": 0}
for r in rows:
    m = r["meas"]; vl = r["new"][1].get("vector-laplace", [None])[0]
    best = min(x for x in [m["bestλ"], m["em"], vl] if x)
    lines = []
    for k in ("new", "base"):
        pick, pr = r[k]
        pm = m[meas_of[pick]] if pick in meas_of else (vl if pick == "vector-laplace" else None)
        pratio = pm/best if pm else None
        if pratio and pratio > 1.5: npk[k] += 1
        miss = []
        for est, mk in meas_of.items():
            if est in pr and pr[est][1]:
                q = pr[est][0]/m[mk]
                if q > 3 or q < 1/3: miss.append(f"{est[8:]} {pr[est][0]:.2e}/{m[mk]:.2e}={q:.2f}")
        if miss: nmiss[k] += 1
        em = pr.get("a-priori em"); ems = "" if em is None else f"EM {'R' if em[1] else 'U'} {em[0]:.2e}"
        lines.append((k, pick, pratio, ems, miss))
    changed = r["new"] != r["base"]
    nchg += changed
    flag = changed or any(l[4] or (l[2] and l[2] > 1.5) for l in lines)
    if flag:
        print(f"{r['t']:34s} EMmeas {m['em']:.2e} best {best:.2e}" + ("  CHANGED" if changed else ""))
        for k, pick, pratio, ems, miss in lines:
            ps = "?" if pratio is None else f"{pratio:.2f}x"
            print(f"   {k:4s} pick {pick:15s} {ps:7s} {ems:18s} {'; '.join(miss)}")
print(f"cells {len(rows)} changed {nchg}; cells with a ranked miss >3x new {nmiss['new']} base {nmiss['base']}; picks >1.5x new {npk['new']} base {npk['base']}")
