#!/bin/bash
# run3.sh POP N EH SEED [GRID]: one release; plan + default map with lead19 and with base; every λ once; scored into results-new / results-base
set -u
cd /tmp/attack22; N=/tmp/lead19/geopriv-lead19; B=/tmp/lead19/geopriv-base
p=$1; n=$2; eh=$3; s=$4; k=${5:-61}; t=$p-$n-$eh-$s; [ $k = 61 ] || t=$t-g$k; d=runs/$t; mkdir -p $d $d/B
eps=$(python3 -c "print($eh/(2**0.5*20000/($k-1)))")
pf=pops/$p-$n-$s; tf=$pf-g$k.npy
[ -f $pf.csv ] || python3 s/gen.py $p $n $s $pf.csv
[ -f $tf ] || python3 s/truth.py $pf.csv $tf 0 20000 0 20000 $k
GA=""; [ $k = 61 ] || GA="--grid $k"
$N map release --epsilon $eps $GA --seed $((s*7919+${#p})) < $pf.csv > $d/rep.jsonl 2>$d/rel.err
$N map plan --epsilon $eps --n $n $GA --reports $d/rep.jsonl --verbose > $d/plan.txt 2>&1
$B map plan --epsilon $eps --n $n $GA --reports $d/rep.jsonl --verbose > $d/B/plan.txt 2>&1
$N map aggregate --epsilon $eps $GA < $d/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
if cmp -s <(sed -n 2p $d/plan.txt | cut -d: -f1) <(sed -n 2p $d/B/plan.txt | cut -d: -f1); then cp $d/agg-plan.json $d/B/agg-plan.json; else $B map aggregate --epsilon $eps $GA < $d/rep.jsonl > $d/B/agg-plan.json 2>/dev/null; fi
for L in 0 0.2 0.4 0.6 0.8 1; do $N map aggregate --epsilon $eps $GA --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
python3 s/score.py $tf $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
python3 s/score.py $tf $d/B/plan.txt $d/B/agg-plan.json $d/agg-l*.json > $d/B/score.json
echo "{\"t\":\"$t\",\"eps\":$eps,\"score\":$(cat $d/score.json)}" >> results-new.jsonl
echo "{\"t\":\"$t\",\"eps\":$eps,\"score\":$(cat $d/B/score.json)}" >> results-base.jsonl
rm -f $d/rep.jsonl
