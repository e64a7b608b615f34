#!/bin/bash
# attack20: F7 (shops eh 100) and F4 (jatoms eh 60) on more seeds, EM scored
cd /tmp/attack20
for c in "shops 100000 100 4" "shops 100000 100 7" "shops 100000 30 3" "jatoms 100000 60 4" "jatoms 100000 60 5"; do
  TAG=-c8 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
  TAG=-c8 nice -n 5 bash s/emcell.sh $c >/dev/null 2>&1
done
echo done > chain8.done
