#!/usr/bin/env python3
"""The cost of an analyst read on the collector (branch collector2, attack9
O1: every read now asks the writer for `PRAGMA data_version` first).

    read-cost.py SERVE [--reports 20000] [--gets 3000] [--path /v1/tasks/income/estimate]

Starts SERVE (a geopriv-serve binary) on a fresh database with
scripts/collector/tasks.toml, stores --reports reports with `SERVE bench`,
then sends --gets GETs of --path one after another over one keep-alive
connection and prints the server's CPU (user+sys from /proc, over the GET
loop only) per GET and the client's mean and p99 wall time per GET.
"""
import argparse, http.client, json, os, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("serve")
ap.add_argument("--reports", type=int, default=20000)
ap.add_argument("--gets", type=int, default=3000)
ap.add_argument("--path", default="/v1/tasks/income/estimate")
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tasks = os.path.join(root, "scripts/collector/tasks.toml")
tick = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick  # utime + stime

with tempfile.TemporaryDirectory() as d:
    token = "read-cost-token-0123456789"
    open(f"{d}/token", "w").write(token)
    srv = subprocess.Popen([a.serve, "--db", f"{d}/db", "--listen", "127.0.0.1:0",
                            "--tasks", tasks, "--token-file", f"{d}/token",
                            "--rate-limit", "1000000"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = srv.stdout.readline().strip().removeprefix("listening on ")
        host, port = addr.rsplit(":", 1)
        stored = 0
        while stored < a.reports:
            out = subprocess.run([a.serve, "bench", "--addr", addr, "--tasks", tasks,
                                  "--task", "income", "--batch", "100", "--connections", "4",
                                  "--duration", "1"], capture_output=True, text=True, check=True)
            c = http.client.HTTPConnection(host, int(port))
            c.request("GET", "/v1/tasks", headers={"Authorization": f"Bearer {token}"})
            stored = json.loads(c.getresponse().read())["tasks"][0]["reports"]
        c = http.client.HTTPConnection(host, int(port))
        hdr = {"Authorization": f"Bearer {token}"}
        for _ in range(50):  # warm up
            c.request("GET", a.path, headers=hdr); c.getresponse().read()
        walls = []
        c0 = cpu(srv.pid)
        t0 = time.perf_counter()
        for _ in range(a.gets):
            t = time.perf_counter()
            c.request("GET", a.path, headers=hdr)
            r = c.getresponse(); r.read()
            assert r.status == 200, r.status
            walls.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        c1 = cpu(srv.pid)
        walls.sort()
        print(json.dumps({
            "serve": a.serve, "path": a.path, "reports": stored, "gets": a.gets,
            "server_cpu_us_per_get": round((c1 - c0) / a.gets * 1e6, 1),
            "server_cpu_s": round(c1 - c0, 2), "loop_wall_s": round(wall, 2),
            "client_mean_us": round(sum(walls) / len(walls) * 1e6, 1),
            "client_p99_us": round(walls[int(len(walls) * 0.99)] * 1e6, 1),
            "load": open("/proc/loadavg").read().split()[:3],
        }))
    finally:
        srv.kill(); srv.wait()
