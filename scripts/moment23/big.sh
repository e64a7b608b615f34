#!/bin/bash
# big.sh: F3's cells at n = 10^6 (atoms, atomsc; εh 100, 1000; seed 1)
cd /tmp/moment23; B=/work/wt-moment23/target/release/examples/moment_rounding
for p in atomsc atoms; do
  [ -f pops/$p-1000000-1.csv ] || python3 s/gen.py $p 1000000 1 pops/$p-1000000-1.csv
  [ -f pops/$p-1000000-1.npy ] || python3 s/truth.py pops/$p-1000000-1.csv pops/$p-1000000-1.npy
  for eh in 100 1000; do
    eps=$(python3 -c "print($eh/471.40452079103168)")
    /tmp/attack16/geopriv map release --epsilon $eps --seed $((7919+${#p})) < pops/$p-1000000-1.csv > reps/$p-$eh-1e6.jsonl 2>/dev/null
    /tmp/attack16/geopriv map plan --epsilon $eps --n 1000000 --reports reps/$p-$eh-1e6.jsonl --verbose > plans/$p-$eh-1e6.txt 2>&1
    /usr/bin/time -f '%e %U %S %M' -o out/$p-$eh-1e6.time $B $eps 1 out/$p-$eh-1e6 < reps/$p-$eh-1e6.jsonl > out/$p-$eh-1e6.json
    rm -f reps/$p-$eh-1e6.jsonl
  done
done
