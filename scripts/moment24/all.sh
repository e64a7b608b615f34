#!/bin/bash
cd /tmp/moment24
for c in "atomsc 100000 1000" "atomsc 100000 100" "atoms 100000 1000" "atoms 100000 100" "atomsc 100000 30" "atoms 100000 30" \
  "road2 100000 100" "road2 100000 1000" "diag 100000 100" "diag 100000 1000" "ring 100000 100" "ring 100000 1000" "ring20 100000 100" "ring20 100000 1000" \
  "road2 100000 30" "diag 100000 30" \
  "atomsc 1000000 100" "atomsc 1000000 1000" "atoms 1000000 100" "atoms 1000000 1000"; do
  nice -n 5 ./run.sh $c
done
rm -f pops/*.csv
echo ALLDONE
