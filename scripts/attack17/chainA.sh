# attack16's open cells with new seeds 3, 4
for s in 3 4; do nice -n 5 s/run.sh corner 1000 0.3 $s; for eh in 30 100 1000; do nice -n 5 s/run.sh road2 100000 $eh $s; done; nice -n 5 s/run.sh atomsc 100000 100 $s; nice -n 5 s/run.sh shops 10000 100 $s; done
for s in 3 4; do nice -n 5 s/run.sh ring20 1000000 100 $s; nice -n 5 s/run.sh ring200 1000000 1000 $s; done
