# hrun.sh: honest hole n 10^4 at eh 100 plus each forged file; default threads vs --threads 1, plan pick, coverage of the honest map
cd /tmp/attack18; E=$(python3 -c "print(100/471.40452079103168)")
for f in none edge max subnormal flood2000 floodedge lattice5000 huge edge10k centre10k mixsub; do
  if [ $f = none ]; then cp h/honest.jsonl h/in.jsonl; else cat h/honest.jsonl h/$f.jsonl > h/in.jsonl; fi
  ./geopriv map aggregate --epsilon $E < h/in.jsonl > h/agg-$f.json 2>h/err-$f.txt; rc=$?
  ./geopriv map aggregate --epsilon $E --threads 1 < h/in.jsonl > h/agg1-$f.json 2>/dev/null
  ./geopriv map plan --epsilon $E --n $(wc -l < h/in.jsonl) --reports h/in.jsonl --verbose > h/plan-$f.txt 2>&1; rp=$?
  same=$(cmp -s h/agg-$f.json h/agg1-$f.json && echo identical || echo DIFFER)
  nan=$(grep -c -i 'nan\|inf' h/agg-$f.json)
  echo "$f rc=$rc plan_rc=$rp threads1=$same nan/inf-lines=$nan plan: $(sed -n 2p h/plan-$f.txt | cut -c1-90)"
done
python3 s/hscore.py h/hole-F.npy h/agg-*.json
