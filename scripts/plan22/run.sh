#!/bin/bash
# run.sh BIN POP N EH SEED : release (main binary), plan with BIN, aggregate default + every λ, score
set -u
cd /tmp/plan22
b=$1; p=$2; n=$3; eh=$4; s=$5; t=$b-$p-$n-$eh-$s; d=runs/$t; mkdir -p $d
G=bin/$b
eps=$(python3 -c "print($eh/471.40452079103168)")
[ -f pops/$p-$n-$s.csv ] && [ -f pops/$p-$n-$s.npy ] || { rm -f pops/$p-$n-$s.npy; python3 s/gen.py $p $n $s pops/$p-$n-$s.csv && python3 s/truth.py pops/$p-$n-$s.csv pops/$p-$n-$s.npy; }
bin/main map release --epsilon $eps --seed $((s*7919+${#p})) < pops/$p-$n-$s.csv > $d/rep.jsonl 2>$d/rel.err
/usr/bin/time -f '%e %U %S %M' -o $d/ptime.txt $G map plan --epsilon $eps --n $n --reports $d/rep.jsonl --verbose > $d/plan.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/time.txt $G map aggregate --epsilon $eps < $d/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
for L in 0 0.2 0.4 0.6 0.8 1; do $G map aggregate --epsilon $eps --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
python3 s/score.py pops/$p-$n-$s.npy $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
echo "{\"t\":\"$t\",\"eps\":$eps,\"time\":\"$(cat $d/time.txt)\",\"ptime\":\"$(cat $d/ptime.txt)\",\"score\":$(cat $d/score.json)}" >> results.jsonl
rm -f $d/rep.jsonl $d/agg-*.json
