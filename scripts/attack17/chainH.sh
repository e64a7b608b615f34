# F1 above and below plan22's εh 20 floor
nice -n 5 s/run.sh atoms 1000000 30 4; nice -n 5 s/run.sh atoms 1000000 3 4
