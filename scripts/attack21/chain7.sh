#!/bin/bash
# attack21: F2's mechanism on lead17's populations at new grids: n 1e5, eh 30/100, grids 19 and 29, seed 5; merged (-c7) and 05b497d (-c7b)
cd /tmp/attack21
for g in 19 29; do for p in streets jatoms atomsc shops road2 ring20; do for e in 100 30; do
  TAG=-c7 nice -n 19 bash s/run.sh $p 100000 $e 5 $g
  G=/tmp/attack20/geopriv TAG=-c7b nice -n 19 bash s/run.sh $p 100000 $e 5 $g
done; done; done
