#!/bin/bash
cd /tmp/moment23; B=/work/wt-moment23/target/release/examples/moment_rounding
for eh in 100 1000 30; do for p in atoms atomsc road2 diag ring ring20 shops; do
  [ -f out/$p-$eh.json ] && continue
  eps=$(python3 -c "print($eh/471.40452079103168)")
  /usr/bin/time -f '%e %U %S %M' -o out/$p-$eh.time $B $eps 1 out/$p-$eh < reps/$p-$eh.jsonl > out/$p-$eh.json
done; done
