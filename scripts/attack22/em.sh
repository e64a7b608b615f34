#!/bin/bash
# em.sh POP GRID SEED N EH: the sweep's cell (lead19 binary) with its reports dumped; plan --verbose on them with lead19 and base; one JSON line to em/rows.jsonl
set -u; cd /tmp/attack22
p=$1; g=$2; s=$3; n=$4; eh=$5; t=$p-g$g-s$s-$n-$eh; N=/tmp/lead19/geopriv-lead19; B=/tmp/lead19/geopriv-base
bb="0 30000 0 30000"; [ $p = city ] && bb="0 20000 0 20000"
nice -n 19 $N map sweep --grid $g --n $n --eps-h $eh --seed $s --population $p --dump $n:$eh:em/$t.jsonl --force > em/$t.md 2>&1 || exit 0
eps=$(grep '^| [0-9]' em/$t.md | head -1 | cut -d'|' -f4 | tr -d ' ')
eps=$(head -1 em/$t.jsonl | python3 -c "import json,sys;print(json.loads(sys.stdin.readline())['epsilon'])")
nice -n 19 $N map plan --bbox $bb --grid $g --epsilon $eps --n $n --reports em/$t.jsonl --verbose > em/$t.new.txt 2>&1
nice -n 19 $B map plan --bbox $bb --grid $g --epsilon $eps --n $n --reports em/$t.jsonl --verbose > em/$t.base.txt 2>&1
rm -f em/$t.jsonl
python3 emrow.py $t >> em/rows.jsonl
