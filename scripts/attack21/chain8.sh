#!/bin/bash
# attack21: F1 at n 1e4-1e5, eh 0.3/1, grids 5 and 9, seed 42, built-in populations; merged (sw8/) and 05b497d (sw8/base-)
cd /tmp/attack21; mkdir -p sw8
for g in 5 9; do for p in city sprawl neighbourhoods coast airports-like; do
  nice -n 19 ./geopriv map sweep --grid $g --n 10000,100000 --eps-h 0.3,1 --seed 42 --population $p > sw8/$p-g$g-s42.md 2>/dev/null
  nice -n 19 /tmp/attack20/geopriv map sweep --grid $g --n 10000,100000 --eps-h 0.3,1 --seed 42 --population $p > sw8/base-$p-g$g-s42.md 2>/dev/null
done; done
