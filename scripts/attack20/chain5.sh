#!/bin/bash
# attack20 item 1: more seeds where lead17's minimax rule can fire (unranked EM, point at its interval's low end), with EM scored
cd /tmp/attack20
for c in "corner 100000 1 3" "corner 100000 1 4" "corner 100000 1 5" "corner 100000 1 6" "corner 100000 3 3" "corner 100000 3 4" \
         "blob 100000 1 3" "gradient 100000 1 3" "blobs3 100000 1 3" "hole 100000 1 3" "hole 100000 1 4" "villages2 100000 1 3" "villages2 100000 1 4" \
         "corner 300000 1 3" "gradient 300000 1 3" "villages2 300000 3 3" "blobs3 10000 3 3" "blobs3 10000 3 4" "hamlets 10000 3 3"; do
  KEEP=1 TAG=-c5 nice -n 5 bash s/run.sh $c >/dev/null 2>&1
  TAG=-c5 nice -n 5 bash s/emcell.sh $c >/dev/null 2>&1
  rm -f runs-c5/$(echo $c | tr ' ' '-')/rep.jsonl
done
echo done > chain5.done
