# per.py TASK FILE SECONDS: one report per second into task TASK of collector H; prints VmRSS every 10 s
import urllib.request, re, time, sys
addr = re.search(r"listening on (\S+)", open("H.log").read()).group(1)
pid = open("H.pid").read().strip()
lines = open(sys.argv[2]).read().splitlines()
def rss(): return int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))
print(sys.argv[1], "start RSS KB", rss(), flush=True)
for i in range(int(sys.argv[3])):
    req = urllib.request.Request(f"http://{addr}/v1/tasks/{sys.argv[1]}/reports", data=lines[i].encode(), headers={"Content-Type": "application/x-ndjson"}, method="POST")
    urllib.request.urlopen(req).read()
    time.sleep(1.0)
    if i % 10 == 9: print(sys.argv[1], i + 1, "periods, RSS KB", rss(), flush=True)
