B=$1
P() { $B privatize threshold --threshold 100000 --width 20000 --mechanism polyplace --epsilon 1e-4 --unit per-dollar --budget-epsilon 1 "$@"; }
echo 1 | P --ledger .x.json.lock >/dev/null 2>&1
( for i in $(seq 1 400); do echo 1 | P --ledger .x.json.lock >/dev/null 2>&1; done ) &
for w in 1 2 3 4 5 6; do ( seq 1 150 | P --ledger x.json > outA.$w 2>errA.$w; echo $? > rcA.$w ) & done
wait
echo "A delivered $(cat outA.* | wc -l), exit codes $(cat rcA.* | tr '\n' ' ')"
python3 -c "import json,os;print('A recorded',json.load(open('x.json'))['releases'] if os.path.exists('x.json') else 'no file'); print('B recorded',json.load(open('.x.json.lock'))['releases'])"
head -1 errA.1 | cut -c1-200
