#!/bin/bash
# attack20: F4 at n 1e6 (jatoms eh 100 and 60, seed 3), EM scored
cd /tmp/attack20
for c in "jatoms 1000000 100 3" "jatoms 1000000 60 3"; do
  TAG=-c9 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
  TAG=-c9 nice -n 5 bash s/emcell.sh $c >/dev/null 2>&1
done
echo done > chain9.done
