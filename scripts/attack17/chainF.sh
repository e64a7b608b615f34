# more seeds: the jittered-atom EM pick (seed 5), item 2 at n 1e5 seed 4, grid 201
nice -n 5 s/run.sh jatoms 100000 10 5; nice -n 5 s/run.sh jatoms 1000000 10 5; nice -n 5 s/run.sh jatoms0 1000000 10 3
for p in streets edges tiny hole; do for eh in 1 10; do nice -n 5 s/run.sh $p 100000 $eh 4; done; done
nice -n 5 s/run.sh streets 100000 10 3 201
