#!/usr/bin/env python3
"""Tally of issue 19 item 15 on its named scope (branch scope19).

Reads the outputs of scripts/scope19/run.sh (`map sweep --predictions`)
and prints, in Markdown: per population the cells, the picks beyond 1.5x
the best measured map, the ranked predictions beyond 3x (measured/predicted
outside [1/3, 3]) and the upper estimates exceeded beyond 3x (measured >
3x an upper estimate `<=`); then every miss with its numbers and the plan's
line; then the full table (one row per cell: pick, pick/best, the ranked
ratios' range).

    scripts/scope19/tally.py /tmp/scope19/*.txt [--full] [--lines] [--matrix]

--matrix: one row per (population, εh) over every n and seed: the picks
(how often each), the largest pick/best, the ranked ratios' range.
"""
import re
import sys
from collections import defaultdict

args = [a for a in sys.argv[1:] if not a.startswith("--")]
full = "--full" in sys.argv
matrix = "--matrix" in sys.argv
lines_too = "--lines" in sys.argv

cells = {}  # (pop, seed, n, eh) -> dict
times = []
for path in args:
    m = re.search(r"/([a-z-]+)-s(\d+)-n", path)
    if not m:
        continue
    pop, seed = m.group(1), int(m.group(2))
    last = None
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if line.startswith("# time:"):
            times.append((path, line[8:]))
            continue
        if line.startswith("| ") and not line.startswith("| n ") and not line.startswith("|---"):
            f = [c.strip() for c in line.strip("|").split("|")]
            try:
                n, eh = int(f[0]), float(f[1])
            except ValueError:
                continue
            last = (pop, seed, n, eh)
            cells[last] = {"preds": [], "secs": float(f[-1]), "row": line}
            continue
        if line.startswith("# pred ") and last:
            # # pred n eh name... predicted measured ratio
            parts = line.split()
            pred, got, ratio = parts[-3], float(parts[-2]), float(parts[-1])
            name = " ".join(parts[4:-3])
            upper = pred.startswith("<=")
            cells[last]["preds"].append((name, float(pred.lstrip("<=")), got, ratio, upper))
        elif line.startswith("# pick ") and last:
            parts = line.split()
            # # pick n eh <pick name...> measured <best name...> best ratio
            ratio = float(parts[-1])
            rest = parts[4:-1]
            nums = [i for i, t in enumerate(rest) if re.fullmatch(r"[0-9.]+e[-+]?\d+|NaN|inf", t)]
            pick = " ".join(rest[: nums[0]])
            best_name = " ".join(rest[nums[0] + 1 : nums[1]])
            cells[last].update(pick=pick, pick_ase=float(rest[nums[0]]), best_name=best_name,
                               best=float(rest[nums[1]]), pick_ratio=ratio)
        elif line.startswith("# line ") and last:
            cells[last]["line"] = line[7:]


def short(name):
    return name.replace("a-priori ", "").replace("λ=", "λ ")


per_pop = defaultdict(lambda: defaultdict(int))
misses = []
for key in sorted(cells):
    c = cells[key]
    pop = key[0]
    per_pop[pop]["cells"] += 1
    if "pick_ratio" not in c:
        per_pop[pop]["no pick line"] += 1
        continue
    ranked = [p for p in c["preds"] if not p[4]]
    upper = [p for p in c["preds"] if p[4]]
    per_pop[pop]["ranked"] += len(ranked)
    per_pop[pop]["upper"] += len(upper)
    bad_r = [p for p in ranked if p[3] > 3 or p[3] < 1 / 3]
    bad_u = [p for p in upper if p[3] > 3]
    per_pop[pop]["ranked beyond 3x"] += len(bad_r)
    per_pop[pop]["upper exceeded 3x"] += len(bad_u)
    if c["pick_ratio"] > 1.5:
        per_pop[pop]["pick beyond 1.5x"] += 1
    if bad_r or bad_u or c["pick_ratio"] > 1.5:
        misses.append((key, c, bad_r, bad_u))

print("| population | seed-cells | ranked predictions | upper estimates | picks beyond 1.5x | ranked beyond 3x | upper exceeded 3x |")
print("|---|---:|---:|---:|---:|---:|---:|")
tot = defaultdict(int)
for pop, d in per_pop.items():
    for k, v in d.items():
        tot[k] += v
    print(f"| {pop} | {d['cells']} | {d['ranked']} | {d['upper']} | {d['pick beyond 1.5x']} | {d['ranked beyond 3x']} | {d['upper exceeded 3x']} |")
print(f"| **all** | {tot['cells']} | {tot['ranked']} | {tot['upper']} | {tot['pick beyond 1.5x']} | {tot['ranked beyond 3x']} | {tot['upper exceeded 3x']} |")
print()
print("Misses:")
print()
print("| population | seed | n | εh | pick (measured) | best measured | pick/best | ranked beyond 3x (measured/predicted) | upper exceeded |")
print("|---|---:|---:|---:|---|---|---:|---|---|")
for (pop, seed, n, eh), c, bad_r, bad_u in misses:
    br = "; ".join(f"{short(p[0])} {p[3]:.2f} ({p[1]:.3e} → {p[2]:.3e})" for p in bad_r) or "–"
    bu = "; ".join(f"{short(p[0])} {p[3]:.2f}" for p in bad_u) or "–"
    print(f"| {pop} | {seed} | {n:.0e} | {eh:g} | {short(c['pick'])} {c['pick_ase']:.3e} | {short(c['best_name'])} {c['best']:.3e} | {c['pick_ratio']:.2f} | {br} | {bu} |")
if lines_too:
    print()
    for (pop, seed, n, eh), c, _, _ in misses:
        print(f"* {pop} s{seed} n {n:.0e} εh {eh:g}: `{c.get('line', '')}`")
if full:
    print()
    print("| population | seed | n | εh | pick | pick/best | best | ranked: measured/predicted (min–max, count) | upper: max measured/predicted | s |")
    print("|---|---:|---:|---:|---|---:|---|---|---|---:|")
    for key in sorted(cells):
        c = cells[key]
        pop, seed, n, eh = key
        ranked = [p[3] for p in c["preds"] if not p[4]]
        upper = [p[3] for p in c["preds"] if p[4]]
        rr = f"{min(ranked):.2f}–{max(ranked):.2f} ({len(ranked)})" if ranked else "–"
        uu = f"{max(upper):.2f} ({len(upper)})" if upper else "–"
        print(f"| {pop} | {seed} | {n:.0e} | {eh:g} | {short(c.get('pick', '?'))} | {c.get('pick_ratio', float('nan')):.2f} | {short(c.get('best_name', '?'))} | {rr} | {uu} | {c['secs']:.1f} |")
if matrix:
    print()
    print("| population | εh | seed-cells | picks | max pick/best | ranked measured/predicted (min–max, count) | upper: max measured/predicted |")
    print("|---|---:|---:|---|---:|---|---|")
    groups = defaultdict(list)
    for key in sorted(cells):
        groups[(key[0], key[3])].append(cells[key])
    for (pop, eh), cs in sorted(groups.items()):
        picks = defaultdict(int)
        for c in cs:
            picks[short(c.get("pick", "?"))] += 1
        pk = ", ".join(f"{k} ×{v}" for k, v in sorted(picks.items(), key=lambda kv: -kv[1]))
        ranked = [p[3] for c in cs for p in c["preds"] if not p[4]]
        upper = [p[3] for c in cs for p in c["preds"] if p[4]]
        rr = f"{min(ranked):.2f}–{max(ranked):.2f} ({len(ranked)})" if ranked else "–"
        uu = f"{max(upper):.2f} ({len(upper)})" if upper else "–"
        mp = max(c.get("pick_ratio", float("nan")) for c in cs)
        print(f"| {pop} | {eh:g} | {len(cs)} | {pk} | {mp:.2f} | {rr} | {uu} |")
print()
for p, t in times:
    print(f"{p}: {t}")
