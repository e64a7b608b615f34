#!/bin/bash
# attack21: F5 on more seeds/εh (n 1e6, grid 7, 9), merged (sw5/) and 05b497d (sw5/base-)
cd /tmp/attack21; mkdir -p sw5
for s in 42 43; do for g in 7 9; do for p in neighbourhoods city coast; do
  nice -n 19 ./geopriv map sweep --grid $g --n 1000000 --eps-h 30,100,300 --seed $s --population $p > sw5/$p-g$g-s$s.md 2>/dev/null
  nice -n 19 /tmp/attack20/geopriv map sweep --grid $g --n 1000000 --eps-h 30,100,300 --seed $s --population $p > sw5/base-$p-g$g-s$s.md 2>/dev/null
done; done; done
