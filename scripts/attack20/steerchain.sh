#!/bin/bash
cd /tmp/attack20/st
for eh in 100 1000 30; do for p in atomsc edges road2 streets jatoms jatoms0 tiny hole; do
  nice -n 5 python3 steer.py $p 100000 $eh 3 >> steer.out 2>>steer.err
done; done
echo done >> steer.out
