#!/bin/bash
# attack21 batch 2: map sweep, the built-in populations at grids 7,11,19,23,29, seed 41, n 1e3-1e6, eh 0.1-1000
cd /tmp/attack21; mkdir -p sw
for g in 11 23 7 19 29; do for p in city sprawl neighbourhoods coast airports-like; do
  nice -n 19 ./geopriv map sweep --grid $g --n 1000,10000,100000,1000000 --eps-h 0.1,0.3,1,3,10,100,1000 --seed 41 --population $p > sw/$p-g$g-s41.md 2>sw/$p-g$g-s41.err
done; done
