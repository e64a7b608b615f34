#!/bin/bash
# run.sh MODE [extra upload flags]: one upload against the fake collector in MODE
G=${G:-/tmp/attack9/geopriv}; mode=$1; shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 fake.py $port $mode & fp=$!
for i in $(seq 50); do python3 -c "import socket;socket.create_connection((\"127.0.0.1\",$port))" 2>/dev/null && break; sleep 0.1; done
rm -f m-$mode.json m-$mode.json.*; cp base.json m-$mode.json
L="--ledger m-$mode.json --unit per-dollar --budget-epsilon 1"
start=$(date +%s.%N)
timeout 600 $G outbox upload $L --url http://127.0.0.1:$port --task income --max-attempts 2 --backoff-ms 10 --max-backoff-ms 50 "$@" > out-$mode.json 2> err-$mode.txt; rc=$?
end=$(date +%s.%N)
left=$($G outbox list $L | wc -l)
kill $fp; wait $fp 2>/dev/null
printf '%-14s rc=%s %5.1fs left=%s parked=%s out=%s\n' $mode $rc $(echo "$end - $start" | bc) $left "$(cat m-$mode.json.parked 2>/dev/null | wc -l || echo 0)" "$(cat out-$mode.json)"
head -c 300 err-$mode.txt | cat -v | head -3
