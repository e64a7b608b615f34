#!/bin/bash
cd /tmp/moment23
for p in atoms atomsc road2 diag ring ring20 shops; do for eh in 30 100 1000; do
  eps=$(python3 -c "print($eh/471.40452079103168)")
  t=/tmp/attack16/runs/$p-100000-$eh-1/plan.txt
  if [ -f $t ]; then cp $t plans/$p-$eh.txt; else /tmp/attack16/geopriv map plan --epsilon $eps --n 100000 --reports reps/$p-$eh.jsonl --verbose > plans/$p-$eh.txt 2>&1; fi
done; done
