import sys, json
# EM unranked in base -> ranked in lead19 (the interval's lo raised to the floor); EM ranked prediction vs measured where known
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        if "new" in r:   # em rows
            en, eb = r["new"][1].get("a-priori em"), r["base"][1].get("a-priori em"); meas = r["meas"]["em"]; t = r["t"]
            kn = {k: v[0] for k, v in r["new"][1].items() if "λ" in k}; kb = {k: v[0] for k, v in r["base"][1].items() if "λ" in k}
        else: continue
        if en and eb and (en[1] != eb[1] or en[0] != eb[0]):
            kch = max((abs(kn[k]/kb[k]-1) for k in kn if k in kb), default=0)
            print(f"{t:36s} EM base {'R' if eb[1] else 'U'} {eb[0]:.3e} -> new {'R' if en[1] else 'U'} {en[0]:.3e}; measured {meas:.3e} (new/meas {en[0]/meas:.2f}); kernel preds moved up to {kch*100:.0f}%")
