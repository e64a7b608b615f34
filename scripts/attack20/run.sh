#!/bin/bash
# run.sh POP N EH SEED [GRID] : release with the CLI, plan, aggregate (default + every λ), score against the true map (attack17: grid option)
set -u
cd /tmp/attack20; G=${G:-./geopriv}
p=$1; n=$2; eh=$3; s=$4; k=${5:-61}; t=$p-$n-$eh-$s; [ $k = 61 ] || t=$t-g$k; d=runs${TAG:-}/$t; mkdir -p $d
eps=$(python3 -c "print($eh/(2**0.5*20000/($k-1)))")
pf=pops/$p-$n-$s; [ -f pops-ro/$p-$n-$s.csv ] && [ ! -f $pf.csv ] && ln -s ../pops-ro/$p-$n-$s.csv $pf.csv; [ -f pops-ro/$p-$n-$s-g$k.npy ] && [ ! -f $pf-g$k.npy ] && ln -s ../pops-ro/$p-$n-$s-g$k.npy $pf-g$k.npy; tf=$pf-g$k.npy
[ -f $pf.csv ] || python3 s/gen.py $p $n $s $pf.csv
[ -f $tf ] || python3 s/truth.py $pf.csv $tf 0 20000 0 20000 $k
GA=""; [ $k = 61 ] || GA="--grid $k"
$G map release --epsilon $eps $GA --seed $((s*7919+${#p})) < $pf.csv > $d/rep.jsonl 2>$d/rel.err
$G map plan --epsilon $eps --n $n $GA --reports $d/rep.jsonl --verbose > $d/plan.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/time.txt $G map aggregate --epsilon $eps $GA < $d/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
for L in 0 0.2 0.4 0.6 0.8 1; do $G map aggregate --epsilon $eps $GA --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
python3 s/score.py $tf $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
echo "{\"t\":\"$t\",\"eps\":$eps,\"time\":\"$(cat $d/time.txt)\",\"score\":$(cat $d/score.json)}" >> results${TAG:-}.jsonl
[ -n "${KEEP:-}" ] || rm -f $d/rep.jsonl
