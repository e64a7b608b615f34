#!/usr/bin/env python3
"""Mutated-body fuzzing of a running geopriv-serve (scripts/test-collector.sh).

Each request mixes fresh good reports with mutated records (bit flips,
truncations, insertions, duplicated or removed bytes, binary junk, long
lines, non-UTF-8, other versions, other tasks' parameters), sometimes under a
wrong content type. Checks: no 5xx other than 503, the server stays up, and
every good report of a 200 answer is accepted or (if sent before) a
duplicate, never rejected; at the end every acknowledged good id is in the
export.

usage: mutate.py HOST:PORT TOKEN N
"""
import http.client
import json
import os
import random
import sys

host, token, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(12345)
TEMPLATE = ('{"version":2,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},'
            '"mechanism":"polyplace","epsilon":0.0001,"delta":0.0,"value":%r,"report_id":"%s"}')


def good():
    rid = os.urandom(16).hex()
    return rid, (TEMPLATE % (rng.uniform(-2, 3), rid)).encode()


def mutate(b: bytes) -> bytes:
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        if op == 0 and b:
            i = rng.randrange(len(b)); b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            del b[rng.randrange(len(b)):]
        elif op == 2:
            i = rng.randrange(len(b) + 1); b[i:i] = os.urandom(rng.randint(1, 8))
        elif op == 3 and b:
            i = rng.randrange(len(b)); j = min(len(b), i + rng.randint(1, 20)); b[i:j] = b[i:j] * 2
        elif op == 4:
            b = bytearray(os.urandom(rng.randint(0, 300)))
        elif op == 5:
            b = bytearray(b.replace(b'"version":2', b'"version":%d' % rng.choice([0, 1, 3, 65535, -1])))
        elif op == 6:
            b = bytearray(b.replace(b'0.0001', rng.choice([b'1e308', b'NaN', b'-0.0001', b'"x"', b'0.001'])))
        elif op == 7:
            b = b + b'x' * rng.choice([10, 70000])
        elif op == 8:
            b = bytearray(b.replace(b'"report_id"', b'"report_id_"'))
    return bytes(b).replace(b"\n", b" ")


conn = http.client.HTTPConnection(host, timeout=30)
acked = set()
sent = []
bad = 0
for k in range(n):
    records, goods = [], {}
    for _ in range(rng.randint(1, 30)):
        rid, line = good()
        if rng.random() < 0.5:
            records.append(mutate(line))
        else:
            records.append(line)
            goods[len(records)] = rid
    if sent and rng.random() < 0.1:  # a retry of a stored report
        rid, line = rng.choice(sent)
        records.append(line)
        goods[len(records)] = rid
    body = b"\n".join(records) + (b"\n" if rng.random() < 0.8 else b"")
    ctype = "application/x-ndjson" if rng.random() < 0.95 else rng.choice(
        ["application/octet-stream", "text/plain", "", "application/x-ndjson; charset=utf-8"])
    path = "/v1/tasks/income/reports" if rng.random() < 0.97 else rng.choice(
        ["/v1/tasks/nope/reports", "/v1/tasks/%2e%2e/reports", "/v1/tasks/income/reports?x=\x7f"])
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": ctype} if ctype else {})
        r = conn.getresponse()
        data = r.read()
    except (http.client.HTTPException, OSError, ValueError) as e:
        if isinstance(e, ValueError):  # a URL http.client itself refuses to send
            conn.close()
            conn = http.client.HTTPConnection(host, timeout=30)
            continue
        conn.close()
        conn = http.client.HTTPConnection(host, timeout=30)
        continue
    if r.status >= 500 and r.status != 503:
        print(f"request {k}: HTTP {r.status}: {data[:200]!r}")
        bad += 1
        continue
    if r.status != 200 or ctype not in ("application/x-ndjson", "application/x-ndjson; charset=utf-8") \
            or path != "/v1/tasks/income/reports":
        continue
    a = json.loads(data)
    rejected = {x["index"] for x in a["rejected"]}
    for idx, rid in goods.items():
        if idx in rejected:
            print(f"request {k}: good record {idx} rejected: {a['rejected']}")
            bad += 1
        else:
            acked.add(rid)
            sent.append((rid, records[idx - 1]))
    sent = sent[-1000:]

conn = http.client.HTTPConnection(host, timeout=120)
ids = set()
after = 0
while True:
    conn.request("GET", f"/v1/tasks/income/export?after={after}", headers={"Authorization": "Bearer " + token})
    r = conn.getresponse()
    body = r.read().decode()
    ids.update(json.loads(l)["report_id"] for l in body.splitlines() if l)
    nxt = r.getheader("x-next-after")
    if not nxt:
        break
    after = int(nxt)
lost = acked - ids
print(f"{n} mutated requests: {len(acked)} good reports acknowledged, {len(lost)} lost, {bad} failures")
sys.exit(1 if bad or lost else 0)
