#!/bin/bash
tag=$1
for eh in 30 100 1000; do for p in road2 ring ring20 atoms atomsc shops diag; do nice -n 5 /tmp/plan21/s/run21.sh $tag $p 100000 $eh 1; done; done
