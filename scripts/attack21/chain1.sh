#!/bin/bash
# attack21 batch 1: new populations x n 1e3-1e5 x eh 0.1-1000 x grids 5,9,17,31, seed 31
cd /tmp/attack21
for g in 9 17 5 31; do for p in twocity mixat onept stripe uniform border; do for n in 1000 10000 100000; do for e in 0.1 1 10 100 1000; do
  TAG=-a1 nice -n 19 bash s/run.sh $p $n $e 31 $g
done; done; done; done
