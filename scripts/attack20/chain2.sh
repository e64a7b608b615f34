#!/bin/bash
# attack20: the CLI path on the cells where the merged states picked EM at eh 100 (and neighbours)
cd /tmp/attack20
for c in "jatoms 100000 100 3" "jatoms0 100000 100 3" "streets 100000 100 3" "road2 100000 100 3" "jatoms 100000 100 4" "jatoms 100000 30 3" "jatoms 100000 1000 3" "jatoms0 100000 30 3"; do
  KEEP=1 TAG=-c2 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
done
echo done > chain2.done
