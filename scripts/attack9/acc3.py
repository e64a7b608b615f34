# For each whitespace/BOM spelling of one report: does the CLI (`geopriv aggregate`), ReportServer.add_json,
# add_json_batch and ingest(JSON) accept it? ("bit for bit the CLI" needs the same answer everywhere.)
import geopriv, json, subprocess
from geopriv import ReportServer, ReportPolicy, ServerConfig, InputFormat
line = subprocess.run(["/tmp/attack9/geopriv","privatize","threshold","--threshold","100000","--width","20000",
    "--mechanism","polyplace","--epsilon","1e-4","--unmetered"], input="61000\n", capture_output=True, text=True).stdout.strip()
pol = ReportPolicy(1.0, 1e-4)
cases = [("plain","",""),("bom","\ufeff",""),("nbsp","\u00a0","\u00a0"),("u2028","","\u2028"),("vt","\x0b",""),("ff","\x0c","\x0c"),
         ("nel","\u0085",""),("cr","","\r"),("crcr","","\r\r"),("tab","\t","\t"),("bom-ws","\ufeff ",""),("ideographic-sp","\u3000",""),
         ("ws-bom"," \ufeff","")]
print(f"{'case':16s} CLI add_json batch ingest")
for name, pre, post in cases:
    v = pre + line + post
    cli = subprocess.run(["/tmp/attack9/geopriv","aggregate"], input=(v+"\n").encode(), capture_output=True)
    c = b'"n":1' in cli.stdout
    s = ReportServer(pol, ServerConfig())
    try: s.add_json(v); a = True
    except geopriv.GeoprivError: a = False
    b = ReportServer(pol, ServerConfig()).add_json_batch([v]).accepted == 1
    i = ReportServer(pol, ServerConfig()).ingest((v+"\n").encode(), InputFormat.JSON).accepted == 1
    print(f"{name:16s} {c!s:5s} {a!s:5s} {b!s:5s} {i!s:5s}", "" if c == a == b == i else "  <-- differ")
