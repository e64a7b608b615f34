#!/usr/bin/env bash
# Issue 19 item 15 on its named scope (branch scope19): one `map sweep`
# process for one population, seed and list of n on the product's default
# map (61 x 61, h = one cell diagonal, up to 1024 bins per axis), every εh
# of the item, with --predictions (every ranked prediction against its
# measured ASE, the pick against the best measured map, the plan's line).
#
#   scripts/scope19/run.sh POP SEED N[,N...] [EPS_H list] [OUT_DIR]
#   e.g. scripts/scope19/run.sh city 1 1000,10000,100000
#
# Output: OUT_DIR/POP-sSEED-nN.txt (the sweep's table and # lines) and
# a last line "# time: wall user sys maxrss". Run one at a time per
# population, under nice (2 shared cores). Tally: scripts/scope19/tally.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
pop=$1
seed=$2
ns=$3
eh=${4:-0.1,0.3,1,3,10,30,100,300,1000}
out=${5:-/tmp/scope19}
bin=${GEOPRIV_BIN:-target/debug/geopriv}
mkdir -p "$out"
f="$out/$pop-s$seed-n${ns//,/_}-e${eh//,/_}.txt"
{
    echo "# geopriv map sweep --grid 61 --population $pop --seed $seed --n $ns --eps-h $eh --predictions"
    echo "# bin $bin $(git rev-parse --short HEAD) start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
} >"$f"
nice -n 19 /usr/bin/time -f '# time: %e s wall %U s user %S s sys %M KB' -a -o "$f.time" \
    "$bin" map sweep --grid 61 --population "$pop" --seed "$seed" --n "$ns" --eps-h "$eh" \
    --predictions >>"$f"
cat "$f.time" >>"$f"
rm -f "$f.time"
echo "# end $(date -u +%H:%M:%S)" >>"$f"
echo "$f"
