#!/bin/bash
# run.sh POP N EH : main's and moment24's `map plan`, the maps (moment24's binary: map values unchanged), scores
set -u
cd /tmp/moment24; G=./bin/geopriv; M=/tmp/attack16/geopriv
p=$1; n=$2; eh=$3; s=1; t=$p-$n-$eh; d=runs/$t; mkdir -p $d
eps=$(python3 -c "print($eh/471.40452079103168)")
pc=/tmp/attack16/pops/$p-$n-$s.csv; pn=/tmp/attack16/pops/$p-$n-$s.npy
[ -f $pn ] || pn=/tmp/moment23/pops/$p-$n-$s.npy
if [ ! -f $pc ]; then pc=pops/$p-$n-$s.csv; [ -f $pc ] || python3 s/gen.py $p $n $s $pc; fi
$G map release --epsilon $eps --seed $((s*7919+${#p})) < $pc > $d/rep.jsonl 2>$d/rel.err
$M map plan --epsilon $eps --n $n --reports $d/rep.jsonl --verbose > $d/plan-main.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/plan-time.txt $G map plan --epsilon $eps --n $n --reports $d/rep.jsonl --verbose > $d/plan.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/time.txt $G map aggregate --epsilon $eps < $d/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
$M map aggregate --epsilon $eps < $d/rep.jsonl > $d/agg-mainplan.json 2>/dev/null
for L in 0 0.2 0.4 0.6 0.8 1; do $G map aggregate --epsilon $eps --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
python3 s/score.py $pn $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
python3 s/score.py $pn $d/plan-main.txt $d/agg-mainplan.json $d/agg-l*.json > $d/score-main.json
echo "{\"t\":\"$t\",\"eps\":$eps,\"time\":\"$(cat $d/time.txt)\",\"plantime\":\"$(cat $d/plan-time.txt)\",\"score\":$(cat $d/score.json),\"main\":$(cat $d/score-main.json)}" >> results.jsonl
rm -f $d/rep.jsonl $d/agg-*.json
