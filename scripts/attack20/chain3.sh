#!/bin/bash
# attack20 item 3: band22's m >= ln 20 columns where many small clusters / atoms leave live cells below m*
cd /tmp/attack20/band
for p in airports-like sprawl; do
  /usr/bin/time -f '%e s wall %U user %S sys %M KB' nice -n 5 ../geopriv map sweep --coverage --by-truth --population $p --grid 61 --n 1000,10000,100000 --eps-h 3,10,30 --reps 4 --seed 5 > sweep-$p.txt 2> sweep-$p.err
done
echo done > ../chain3.done
