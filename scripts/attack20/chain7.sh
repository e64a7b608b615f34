#!/bin/bash
# attack20: more cells where lead17's minimax rule fired (corner, n 3e4-1e5, eh 1), EM scored
cd /tmp/attack20
for c in "corner 100000 1 7" "corner 100000 1 8" "corner 30000 1 3" "corner 30000 1 4" "corner 30000 1 5" "corner 100000 1 9" "corner 100000 0.5 3" "corner 100000 0.5 4"; do
  TAG=-c7 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
  TAG=-c7 nice -n 5 bash s/emcell.sh $c >/dev/null 2>&1
done
echo done > chain7.done
