#!/bin/bash
# attack21 confirm F2: twocity/hole/gradient n 1e5 eh 30,100,300 grids 9,13 seeds 32,33, merged (-f2) vs pre-session-18 (-f2old)
cd /tmp/attack21
for s in 32 33; do for g in 9 13; do for p in twocity hole gradient; do for e in 100 30 300; do
  TAG=-f2 nice -n 19 bash s/run.sh $p 100000 $e $s $g
  G=/tmp/lead17/geopriv TAG=-f2old nice -n 19 bash s/run.sh $p 100000 $e $s $g
done; done; done; done
