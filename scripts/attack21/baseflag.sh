#!/bin/bash
# attack21: re-run every swan.py-flagged seed-41 sweep row with /tmp/attack20/geopriv (05b497d, attack20s build)
cd /tmp/attack21; mkdir -p swbase
python3 swan.py sw/*.md | grep -v '^rows' | while read f _ n _ e _; do
  p=${f%-g*}; r=${f#$p-g}; g=${r%-s*}; s=${r#*-s}; o=swbase/$p-g$g-s$s-n$n-e$e.md
  [ -f $o ] || nice -n 19 /tmp/attack20/geopriv map sweep --grid $g --n $n --eps-h $e --seed $s --population $p > $o 2>/dev/null
done
