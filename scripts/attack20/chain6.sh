#!/bin/bash
# attack20: jatoms-like at eh 100-300 (EM ranked, picked, 1.56x in chain2): more seeds and neighbours, EM scored
cd /tmp/attack20
for c in "jatoms 100000 100 5" "jatoms 100000 100 7" "jatoms0 100000 100 5" "atoms 100000 100 3" "jatoms 100000 300 3" "jatoms 100000 60 3" "shops 100000 100 3" "villages2 100000 100 3"; do
  TAG=-c6 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
  TAG=-c6 nice -n 5 bash s/emcell.sh $c >/dev/null 2>&1
done
echo done > chain6.done
