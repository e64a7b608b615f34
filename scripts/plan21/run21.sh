#!/bin/bash
# run21.sh TAG POP N EH SEED : TAG=before releases (kept), plans, aggregates (default + every λ), scores; TAG=after re-plans and re-aggregates (default) on the same reports with ./geopriv.after, reusing before's λ maps
# Setup: mkdir /tmp/plan21 && cp -r scripts/attack16 /tmp/plan21/s && cp scripts/plan21/* /tmp/plan21/s/ && ln -s /tmp/attack16/pops /tmp/plan21/pops (or let s/gen.py + s/truth.py make pops/POP-N-SEED.csv/.npy); geopriv.before = main 4284c8b release, geopriv.after2 = this branch
set -u
cd /tmp/plan21; tag=$1; G=./geopriv.$tag
p=$2; n=$3; eh=$4; s=$5; t=$p-$n-$eh-$s; b=runs/before/$t; d=runs/$tag/$t; mkdir -p $d
eps=$(python3 -c "print($eh/471.40452079103168)")
if [ $tag = before ]; then
  $G map release --epsilon $eps --seed $((s*7919+${#p})) < pops/$p-$n-$s.csv > $d/rep.jsonl 2>$d/rel.err
  for L in 0 0.2 0.4 0.6 0.8 1; do $G map aggregate --epsilon $eps --lambda $L < $d/rep.jsonl > $d/agg-l$L.json 2>/dev/null; done
else
  for L in 0 0.2 0.4 0.6 0.8 1; do ln -sf ../../before/$t/agg-l$L.json $d/agg-l$L.json; done
fi
/usr/bin/time -f '%e %U %S %M' -o $d/plantime.txt $G map plan --epsilon $eps --n $n --reports $b/rep.jsonl --verbose > $d/plan.txt 2>&1
/usr/bin/time -f '%e %U %S %M' -o $d/time.txt $G map aggregate --epsilon $eps < $b/rep.jsonl > $d/agg-plan.json 2>$d/agg.err
python3 s/score.py pops/$p-$n-$s.npy $d/plan.txt $d/agg-plan.json $d/agg-l*.json > $d/score.json
echo "{\"tag\":\"$tag\",\"t\":\"$t\",\"eps\":$eps,\"plantime\":\"$(cat $d/plantime.txt)\",\"time\":\"$(cat $d/time.txt)\",\"score\":$(cat $d/score.json)}" >> results.jsonl
