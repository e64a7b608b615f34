# up.py : upload rep.jsonl halves to A, B and all to C; fetch the three states
import urllib.request, json, re, sys
addr = {c: re.search(r"listening on (\S+)", open(f"{c}.log").read()).group(1) for c in "ABC"}
tok = open("token.txt").read().strip()
lines = open(sys.argv[1] if len(sys.argv) > 1 else "rep.jsonl").read().splitlines()
def post(c, chunk):
    req = urllib.request.Request(f"http://{addr[c]}/v1/tasks/atoms/reports", data="\n".join(chunk).encode(), headers={"Content-Type": "application/x-ndjson"}, method="POST")
    return json.loads(urllib.request.urlopen(req).read())["accepted"]
half = len(lines) // 2
for c, part in (("A", lines[:half]), ("B", lines[half:]), ("C", lines)):
    acc = 0
    for i in range(0, len(part), 1000): acc += post(c, part[i:i+1000])
    print(c, "accepted", acc)
for c in "ABC":
    req = urllib.request.Request(f"http://{addr[c]}/v1/tasks/atoms/state", headers={"Authorization": "Bearer " + tok})
    s = urllib.request.urlopen(req).read()
    open(f"state{c}.json", "wb").write(s)
    st = json.loads(s); m = st["periods"][0]["map"]
    print(c, "periods", len(st["periods"]), "bins", len(m["bins"]), "moments", None if m.get("moments") is None else len(m["moments"]))
