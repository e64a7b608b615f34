# Differential: does report_id_of_json(v) name the id the ReportServer reads from v,
# for every hostile spelling v of a report the server accepts? (geopriv.spark routes rows by it.)
import geopriv, json, random, itertools, subprocess, sys
from geopriv import ReportServer, ReportPolicy, ServerConfig, report_id_of_json, report_id_of_frame
random.seed(5)
lines = subprocess.run(["/tmp/attack9/geopriv","privatize","threshold","--threshold","100000","--width","20000",
    "--mechanism","polyplace","--epsilon","1e-4","--unmetered"], input="\n".join(str(60000+i*37) for i in range(400)),
    capture_output=True, text=True).stdout.split("\n")[:400]
pol = ReportPolicy(1.0, 1e-4)
def esc(s): return "".join("\\u%04x" % ord(c) if random.random() < 0.5 else c for c in s)
def variants(line):
    o = json.loads(line); X = o["report_id"]; body = line[1:-1]
    other = "%032x" % random.getrandbits(128)
    yield "upper", line.replace(X, X.upper())
    yield "mixed", line.replace(X, "".join(c.upper() if random.random()<.5 else c for c in X))
    yield "escaped-id", line.replace(X, esc(X))
    yield "escaped-key", line.replace('"report_id"', '"report\\u005fid"')
    yield "escaped-key2", line.replace('"report_id"', '"\\u0072eport_id"')
    yield "dup-id-same", line[:-1] + ',"report_id":"%s"}' % X
    yield "dup-id-other", line[:-1] + ',"report_id":"%s"}' % other
    yield "dup-id-first-other", '{"report_id":"%s",' % other + body + "}"
    yield "dup-id-null", line[:-1] + ',"report_id":null}'
    yield "dup-value", line[:-1] + ',"value":0.5}'
    yield "id-first", '{"report_id":"%s",' % X + body.replace(',"report_id":"%s"' % X, "") + "}"
    for name, pre, post in [("bom", "\ufeff", ""), ("ws-bom", " \ufeff", ""), ("bom-bom", "\ufeff\ufeff", ""),
                            ("nbsp", "\u00a0", "\u00a0"), ("u2028", "", "\u2028"), ("vt", "\x0b", ""), ("ff", "\x0c", "\x0c"),
                            ("cr", "", "\r"), ("crcr", "", "\r\r"), ("tab", "\t", "\t"), ("nel", "\u0085", ""),
                            ("nul", "", "\x00"), ("trailing-x", "", " x"), ("two-objects", "", line), ("comma", "", ","),
                            ("bom-ws", "\ufeff ", " "), ("zwsp", "\u200b", "")]:
        yield name, pre + line + post
    yield "ws-in-object", line.replace(":", " : ").replace(",", " ,\n ")
    yield "no-id", line.replace(',"report_id":"%s"' % X, "")
    yield "null-id", line.replace('"%s"' % X, "null")
    yield "id-33", line.replace(X, X + "0")
    yield "id-31", line.replace(X, X[:-1])
    yield "id-space", line.replace(X, " " + X)
    yield "id-0x", line.replace(X, "0x" + X[2:])
    yield "id-number", line.replace('"%s"' % X, "12345")
    yield "id-object", line.replace('"%s"' % X, '{"id":"%s"}' % X)
    yield "id-array", line.replace('"%s"' % X, '["%s"]' % X)
    yield "big-number", line.replace('"value":', '"value":1' + "0"*400 + 'e-400,"zz":0,"value2":')
mism = []; counts = {}
for line in lines:
    X = json.loads(line)["report_id"]
    for name, v in variants(line):
        s = ReportServer(pol, ServerConfig())
        try:
            s.add_json(v); acc = True
        except geopriv.GeoprivError as e:
            acc = False
        idj = report_id_of_json(v.encode())
        if acc:
            try:
                s.add_json(line); server_id_is_x = False
            except geopriv.GeoprivError as e:
                server_id_is_x = "[duplicate]" in str(e)
            ok = (idj == X) == server_id_is_x and (server_id_is_x or idj is None or idj != X)
            # batch path too (the column decoder)
            s2 = ReportServer(pol, ServerConfig()); b = s2.add_json_batch([v, line])
            batch_dup = b.duplicates == 1
            ok = ok and (batch_dup == server_id_is_x)
        else:
            ok = True; server_id_is_x = None
        k = counts.setdefault(name, [0, 0, 0]); k[0] += 1; k[1] += acc; k[2] += (not ok)
        if not ok: mism.append((name, v[:120], idj, X, server_id_is_x))
for n, (t, a, m) in counts.items(): print(f"{n:20s} tried {t:4d} accepted {a:4d} mismatches {m}")
print("mismatches:", len(mism))
for m in mism[:10]: print(m)
