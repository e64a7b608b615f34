#!/bin/bash
# attack20 item 1: smooth / clustered populations, n 1e3-1e5, eh 1/3/10, seeds 1,2
cd /tmp/attack20
for n in 1000 10000 100000; do for eh in 1 3 10; do for p in blob blobs3 gradient hole corner hamlets villages2; do for s in 1 2; do
  nice -n 5 bash s/run.sh $p $n $eh $s >/dev/null 2>&1
done; done; done; done
echo chain1 done > chain1.done
