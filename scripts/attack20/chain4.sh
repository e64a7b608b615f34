#!/bin/bash
# attack20: EM's measured ASE on every cell of results.jsonl (and results-c2.jsonl) not yet scored
cd /tmp/attack20
for tag in "" -c2; do
  for t in $(python3 -c "import json;print(' '.join(json.loads(l)['t'] for l in open('results$tag.jsonl')))"); do
    grep -q "\"t\":\"$t\"" results-em$tag.jsonl 2>/dev/null && continue
    TAG=$tag nice -n 5 bash s/emcell.sh $(echo $t | tr '-' ' ') >/dev/null 2>&1
  done
done
echo done > chain4.done
