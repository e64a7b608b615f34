# per10.py TASK FILES...: upload each file (one release of 20k devices) into its own 10-s period of collector R; VmRSS after each
import urllib.request, re, time, sys
addr = re.search(r"listening on (\S+)", open("R.log").read()).group(1); pid = open("R.pid").read().strip()
def rss(): return int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))
print(sys.argv[1], "start RSS KB", rss(), flush=True)
for k, f in enumerate(sys.argv[2:]):
    while int(time.time()) % 10 > 3: time.sleep(0.2)
    t0 = time.time(); lines = open(f).read().splitlines()
    for i in range(0, len(lines), 1000):
        req = urllib.request.Request(f"http://{addr}/v1/tasks/{sys.argv[1]}/reports", data="\n".join(lines[i:i+1000]).encode(), headers={"Content-Type": "application/x-ndjson"}, method="POST")
        urllib.request.urlopen(req).read()
    print(sys.argv[1], k + 1, "periods, RSS KB", rss(), f"upload {time.time()-t0:.1f}s", flush=True)
    time.sleep(6.5)
