#!/bin/bash
# emcell.sh POP N EH SEED [GRID]: EM's measured ASE on run.sh's cell (same release seed), via emscore-bin (the planner's EM, bit-identical to `map aggregate`'s EM pick)
set -u
cd /tmp/attack20; G=./geopriv
p=$1; n=$2; eh=$3; s=$4; k=${5:-61}; t=$p-$n-$eh-$s; [ $k = 61 ] || t=$t-g$k; d=runs${TAG:-}/$t; mkdir -p $d
eps=$(python3 -c "print($eh/(2**0.5*20000/($k-1)))")
pf=pops/$p-$n-$s; tf=$pf-g$k.npy
GA=""; [ $k = 61 ] || GA="--grid $k"
[ -f $d/rep.jsonl ] || $G map release --epsilon $eps $GA --seed $((s*7919+${#p})) < $pf.csv > $d/rep.em.jsonl 2>/dev/null
R=$d/rep.jsonl; [ -f $R ] || R=$d/rep.em.jsonl
./emscore-bin $eps $k < $R > $d/agg-em.json
python3 s/score.py $tf $d/plan.txt $d/agg-em.json > $d/score-em.json
echo "{\"t\":\"$t\",\"em\":$(cat $d/score-em.json)}" >> results-em${TAG:-}.jsonl
rm -f $d/rep.em.jsonl
