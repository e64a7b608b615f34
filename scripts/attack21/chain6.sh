#!/bin/bash
# attack21: F1 on the runner's populations: n 1e5 and 1e6 at eh 0.3, grids 7 and 11, seed 31; merged (-c6) and 05b497d (-c6b)
cd /tmp/attack21
for n in 100000 1000000; do for g in 7 11; do for p in twocity stripe border hole ring200 mixat; do
  TAG=-c6 nice -n 19 bash s/run.sh $p $n 0.3 31 $g
  G=/tmp/attack20/geopriv TAG=-c6b nice -n 19 bash s/run.sh $p $n 0.3 31 $g
done; done; done
