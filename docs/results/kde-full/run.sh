#!/usr/bin/env bash
# Full-scale KDE (the paper's setting): synthetic city, n = 200,000, 61 x 61 grid, eps = 1/1000 per metre.
# Run from a directory holding a release build of the CLI as ./geopriv-full
# (target/release/geopriv copied, so rebuilding does not disturb the run).
cd "$(dirname "$0")"
start=$(date +%s.%N)
./geopriv-full experiment kde --full --out . 
rc=$?
end=$(date +%s.%N)
echo "exit $rc; wall time $(echo "$end - $start" | bc) s; started $(date -d @${start%.*}), ended $(date -d @${end%.*})"
