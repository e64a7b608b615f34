#!/bin/bash
# run.sh POP N EH SEED : release with the CLI, plan, aggregate (default + every λ), score against the true map
set -u
cd /tmp/attack16; G=./geopriv
p=$1; n=$2; eh=$3; s=$4; t=$p-$n-$eh-$s; d=runs/$t; mkdir -p $d
eps=$(python3 -c "print($eh/471.40452079103168)")
[ -f pops/$p-$n-$s.npy ] || { python3 s/gen.py $p $n $s pops/$p-$n-$s.csv && python3 s/truth.py pops/$p-$n-$s.csv pops/$p-$n-$s.npy; }
$G map release --epsilon $eps --seed $((s*7919+${#p})) < pops/$p-$n-$s.csv > $d/rep.jsonl 2>$d/rel.err
$G map plan --epsilon $eps --n $n --reports $d/rep.jsonl --verbose > $d/plan.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/time.txt $G map aggregate --epsilon $eps < $d/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
for L in 0 0.2 0.4 0.6 0.8 1; do $G map aggregate --epsilon $eps --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
python3 s/score.py pops/$p-$n-$s.npy $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
echo "{\"t\":\"$t\",\"eps\":$eps,\"time\":\"$(cat $d/time.txt)\",\"score\":$(cat $d/score.json)}" >> results.jsonl
rm -f $d/rep.jsonl
