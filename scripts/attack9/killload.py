# killload.py PORTFILE BIN THREADS: upload binary frames in batches of 250, retry each batch until a 200;
# 30% of the requests are sent slowly (half the body, a pause, the rest) so that kills land mid-body.
import sys, threading, http.client, json, random, time
portfile, binf, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = [f + b'\0' for f in open(binf, 'rb').read().split(b'\0') if f]
batches = [frames[i:i+250] for i in range(0, len(frames), 250)]
acked = [0]*len(frames); lock = threading.Lock(); stats = {"ok":0, "fail":0, "slow":0, "acc":0, "dup":0}
def port():
    while True:
        try: return int(open(portfile).read().split()[0])
        except Exception: time.sleep(0.05)
def worker(t):
    rnd = random.Random(t)
    for bi in range(t, len(batches), T):
        body = b''.join(batches[bi])
        while True:
            try:
                c = http.client.HTTPConnection('127.0.0.1', port(), timeout=15)
                if rnd.random() < 0.3:
                    c.putrequest('POST', '/v1/tasks/income/reports'); c.putheader('content-type','application/octet-stream')
                    c.putheader('content-length', str(len(body))); c.endheaders()
                    h = len(body)//2; c.send(body[:h]); time.sleep(rnd.uniform(0.05, 0.4)); c.send(body[h:])
                    with lock: stats["slow"] += 1
                else:
                    c.request('POST', '/v1/tasks/income/reports', body, {'content-type':'application/octet-stream'})
                r = c.getresponse(); data = r.read(); c.close()
                if r.status != 200: raise RuntimeError(r.status)
                a = json.loads(data)
                assert a['accepted'] + len(a['duplicates']) == len(batches[bi]), a
                with lock:
                    stats["ok"] += 1; stats["acc"] += a['accepted']; stats["dup"] += len(a['duplicates'])
                    for k in range(len(batches[bi])): acked[bi*250+k] = 1
                break
            except Exception as e:
                with lock: stats["fail"] += 1
                time.sleep(0.1)
ths = [threading.Thread(target=worker, args=(t,)) for t in range(T)]
[t.start() for t in ths]; [t.join() for t in ths]
print(json.dumps(stats), "acked", sum(acked), "of", len(frames))
