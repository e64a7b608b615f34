#!/usr/bin/env python3
# Locations of the map-speed benchmark (BENCHMARKS.md, "Branch mapspeed"):
# 10^6 locations of a clustered city: 12 Gaussian clusters (sd 300-1400 m),
# 15% uniform background, 20 km square, clamped to the box; seeded.
import random
r = random.Random(7)
cs = [(2e3 + r.random()*16e3, 2e3 + r.random()*16e3, 300 + 100*k) for k in range(12)]
out = []
for i in range(1_000_000):
    if r.random() < 0.15:
        x, y = r.random()*20e3, r.random()*20e3
    else:
        cx, cy, s = cs[r.randrange(12)]
        x = min(max(r.gauss(cx, s), 0.0), 20e3); y = min(max(r.gauss(cy, s), 0.0), 20e3)
    out.append(f"{x:.3f},{y:.3f}")
print("\n".join(out))
