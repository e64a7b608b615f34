# F1's reach: more seeds at n 1e6, eh 10
nice -n 5 s/run.sh jatoms 1000000 10 6; nice -n 5 s/run.sh atoms 1000000 10 4; nice -n 5 s/run.sh jatoms0 1000000 10 5
