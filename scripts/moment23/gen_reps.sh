#!/bin/bash
# gen_reps.sh: reports for the experiment (main's release binary; same seeds as attack16's run.sh)
cd /tmp/moment23
for p in atoms atomsc road2 diag ring ring20 shops; do for eh in 30 100 1000; do
  eps=$(python3 -c "print($eh/471.40452079103168)"); s=1
  [ -f reps/$p-$eh.jsonl ] || /tmp/attack16/geopriv map release --epsilon $eps --seed $((s*7919+${#p})) < /tmp/attack16/pops/$p-100000-1.csv > reps/$p-$eh.jsonl 2>/dev/null
done; done
