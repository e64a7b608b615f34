#!/bin/bash
# camp.sh BIN : the brief's cells, F4's first, then n 10^5, then 10^6
B=$1
./f4.sh $B
for n in 100000 1000000; do for p in road2 ring ring20 ring200 atoms atomsc diag; do for eh in 30 100 1000; do
  case "$p $n $eh" in "ring20 1000000 100"|"ring200 1000000 1000") continue;; esac
  nice -n 5 s/run.sh $B $p $n $eh 1
done; done; done
