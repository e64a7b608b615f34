#!/bin/bash
# attack21: re-run every an.py-flagged runner cell of results-a1 at 05b497d (/tmp/attack20/geopriv), TAG -b1
cd /tmp/attack21
python3 an.py results-a1.jsonl | grep -v '^cells' | awk '{print $1}' | while read t; do
  IFS=- read p n e s g <<< "$t"; g=${g#g}
  grep -q "\"$t\"" results-b1.jsonl 2>/dev/null || G=/tmp/attack20/geopriv TAG=-b1 nice -n 19 bash s/run.sh $p $n $e $s $g
done
