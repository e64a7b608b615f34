# new populations: n 1e4 every eh (seed 3), n 1e5 (seed 3), grids 5/11 at 1e4, seed 4 at 1e4
for p in jatoms streets edges tiny hole; do for eh in 0.1 0.3 1 10 30 100 1000; do nice -n 5 s/run.sh $p 10000 $eh 3; done; done
for p in jatoms streets edges tiny hole; do for eh in 0.3 1 10 100 1000; do nice -n 5 s/run.sh $p 100000 $eh 3; done; done
for p in jatoms streets tiny hole; do for k in 5 11; do for eh in 0.3 1 10 100; do nice -n 5 s/run.sh $p 10000 $eh 3 $k; done; done; done
for p in jatoms streets edges tiny hole; do for eh in 0.3 1 10 100; do nice -n 5 s/run.sh $p 10000 $eh 4; done; done
for p in streets hole; do for eh in 0.3 1 10; do nice -n 5 s/run.sh $p 1000000 $eh 3; done; done
nice -n 5 s/run.sh jatoms 100000 100 3 201
