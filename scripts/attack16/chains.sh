for s in 1 2; do for n in 1000 10000 100000; do for eh in 0.3 1 10; do for p in shops gradient ring corner; do nice -n 5 s/run.sh $p $n $eh $s; done; done; done; done
for eh in 0.3 1 10; do for p in shops gradient ring corner; do nice -n 5 s/run.sh $p 1000000 $eh 1; done; done
for n in 10000 1000000; do for eh in 0.1 100 1000; do for p in shops gradient ring corner; do nice -n 5 s/run.sh $p $n $eh 1; done; done; done
for eh in 0.3 1 10; do for p in shops gradient ring corner; do nice -n 5 s/run.sh $p 1000000 $eh 2; done; done
for p in atoms ring20 ring200; do for eh in 100 1000; do nice -n 5 s/run.sh $p 100000 $eh 1; done; done
for p in shops ring atoms ring20; do nice -n 5 s/run.sh $p 1000000 100 2; done
for p in atoms ring20 ring200; do for eh in 10 100 1000; do nice -n 5 s/run.sh $p 1000000 $eh 1; done; done
for p in road diag; do for eh in 10 100 1000; do nice -n 5 s/run.sh $p 100000 $eh 1; done; done
for p in road; do for eh in 1 100 1000; do nice -n 5 s/run.sh $p 1000000 $eh 1; done; done
