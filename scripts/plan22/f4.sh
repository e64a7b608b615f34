#!/bin/bash
B=$1
for c in "ring20 1000000 100 1" "ring20 1000000 100 2" "ring200 1000000 1000 1"; do nice -n 5 s/run.sh $B $c; done
