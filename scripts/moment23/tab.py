# moment23 experiment: see BENCHMARKS.md "Branch moment23"; paths under /tmp/moment23
# tab.py: one row per cell of the moment23 experiment (out/*.json, plans/*.txt, true maps)
import json, re, numpy as np, os, sys
rows = []
for p in "atoms atomsc road2 diag ring ring20 shops".split():
    for eh in (30, 100, 1000):
        f = f"out/{p}-{eh}.json"
        if not os.path.exists(f) or os.path.getsize(f) == 0: continue
        d = json.load(open(f)); pl = open(f"plans/{p}-{eh}.txt").read()
        T = float(re.search(r"kernel-map rounding ([0-9.e-]+)", pl).group(1)) if "kernel-map rounding" in pl else float("nan")
        m = re.search(r"a-priori λ=1\.0\s+ASE ([0-9.e-]+)\s+\(variance ([0-9.e-]+)", pl)
        pred, var = float(m.group(1)), float(m.group(2))
        pick = re.search(r"^pick ([^:]+):", pl, re.M).group(1)
        F = np.load(f"/tmp/attack16/pops/{p}-100000-1.npy")
        mp = np.fromfile(f"out/{p}-{eh}.map"); r12 = np.fromfile(f"out/{p}-{eh}.r12")
        ase = float(np.mean((mp-F)**2)); asec = float(np.mean((mp-r12-F)**2))
        exc = ase - var  # measured error beyond the predicted variance
        mom = var + d["r12"] - 2*d["noise_term"]; mom2 = var + max(d["r12"] - d["noise_term"], 0.0)
        rows.append((p, eh, d["measured"], d["r1"], d["r12"], d["r1_denoised"], d["noise_term"], d["round16"], T, var, ase, pred, mom, mom2, asec, pick))
print("| pop | εh | meas R² | R̂₁² | R̂₁₂² | R̂₁²−noise | noise | round16 | planner T | var(λ=1) | ASE vs truth | pred/ASE main | (var+R̂₁₂²−2noise)/ASE | (var+R̂₁₂²−noise)/ASE | ASE after −R̂₁₂ | main pick |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    p, eh, meas, r1, r12, den, noise, r16, T, var, ase, pred, mom, mom2, asec, pick = r
    print(f"| {p} | {eh} | {meas:.3g} | {r1:.3g} ({r1/meas:.2f}) | {r12:.3g} ({r12/meas:.2f}) | {den:.3g} | {noise:.3g} | {r16:.3g} ({r16/meas:.3g}) | {T:.3g} ({T/meas:.3g}) | {var:.3g} | {ase:.3g} | {pred/ase:.3g} | {mom/ase:.3g} | {mom2/ase:.3g} | {asec:.3g} ({asec/ase:.2f}) | {pick} |")
