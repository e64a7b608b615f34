#!/bin/bash
# attack21 confirm F1: n 1e6 eh 0.3/1 grids 9,11,13, seeds 42,43, merged main vs /tmp/lead17/geopriv (pre-session-18 main)
cd /tmp/attack21; mkdir -p sw3
for s in 42 43; do for g in 11 9 13; do for p in city neighbourhoods sprawl; do
  nice -n 19 ./geopriv map sweep --grid $g --n 1000000 --eps-h 0.3,1 --seed $s --population $p > sw3/$p-g$g-s$s.md 2>/dev/null
  nice -n 19 /tmp/lead17/geopriv map sweep --grid $g --n 1000000 --eps-h 0.3,1 --seed $s --population $p > sw3/old-$p-g$g-s$s.md 2>/dev/null
done; done; done
