#!/bin/bash
# one sweep: BIN(new|base) POP GRID SEED
b=$1; p=$2; g=$3; s=$4
case "$s-$g" in 45-25|45-41|45-61|45-17|45-3) exit 0;; esac
[ -f STOPSW ] && exit 0
B=/tmp/lead19/geopriv-lead19; [ $b = base ] && B=/tmp/lead19/geopriv-base
f=sw/$b-$p-g$g-s$s.md; [ -s $f ] && exit 0
nice -n 19 $B map sweep --grid $g --n 10000,100000,1000000 --eps-h 20,50,100,300,1000 --seed $s --population $p > $f.tmp 2>&1 && mv $f.tmp $f
