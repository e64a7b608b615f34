# follow-ups: the EM pick on jittered atoms at eh 10 (seed 4, n 1e6), the lambda<1 picks' coverage at n 1e5/1e6
while pgrep -f "bash s/chainA.sh" >/dev/null; do sleep 5; done
nice -n 5 s/run.sh jatoms 100000 10 4; nice -n 5 s/run.sh jatoms 100000 30 3; nice -n 5 s/run.sh jatoms 1000000 10 3
for p in tiny hole; do nice -n 5 s/run.sh $p 10000 1 5; nice -n 5 s/run.sh $p 1000000 1 3; done
