# helpers: source lib.sh; SERVE, CLI set
SERVE=${SERVE:-/tmp/attack9/geopriv-serve}
CLI=/tmp/attack9/geopriv
TOK=attack9-token-$$
echo $TOK > token
cp /work/wt-attack9/scripts/collector/tasks.toml tasks.toml
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start DB PORT LOG -> sets PID
start() {
  $SERVE --db "$1" --listen "127.0.0.1:$2" --tasks tasks.toml --token-file token >>"$3.out" 2>>"$3.err" &
  PID=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && return 0; kill -0 $PID 2>/dev/null || { echo "server exited: $(tail -3 $3.err)"; return 1; }; sleep 0.05; done
  echo "no start"; return 1
}
api() { curl -s -H "Authorization: Bearer $(cat token)" "http://127.0.0.1:$1$2"; }
export_all() { # PORT TASK
  local after=0 next
  while :; do
    next=$(curl -sf -D - -o page.ndjson -H "Authorization: Bearer $(cat token)" "http://127.0.0.1:$1/v1/tasks/$2/export?after=$after" | tr -d '\r' | sed -n 's/^x-next-after: //p')
    cat page.ndjson; [ -n "$next" ] || break; after=$next
  done
}
