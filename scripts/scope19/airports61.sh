#!/usr/bin/env bash
# The bundled airports (real data: the 3,069 airports of the contiguous US
# in Web Mercator, resampled with replacement to n; the box is theirs, so
# the 61 x 61 map's cells are 106.8 km x 57.6 km) on the CLI's default map
# (61 x 61, up to 1024 bins), through tests/planner_model.rs's ignored
# grid (branch scope19): every ranked prediction against its measured ASE
# and the pick against the best measured map.
#
#   scripts/scope19/airports61.sh SEED "a:0.1:1000;a:0.3:1000;..." OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${PLANNER_MODEL_BIN:-$(ls -t target/debug/deps/planner_model-* | grep -v '\.d$' | head -1)}
{
    echo "# $bin seed $1 cells $2 start $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
    GEOPRIV_PLANNER_GRID=61 GEOPRIV_PLANNER_DEBUG=1 GEOPRIV_PLANNER_SEED="$1" GEOPRIV_PLANNER_CELLS="$2" \
        nice -n 19 /usr/bin/time -f '# time: %e s wall %U s user %S s sys %M KB' \
        "$bin" --ignored --nocapture full_grid 2>&1 || true
    echo "# end $(date -u +%H:%M:%S)"
} >"$3"
echo "$3"
