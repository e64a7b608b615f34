import subprocess, sys, os, random, time, json, signal, glob
PY = sys.executable; ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
CLI = os.environ.get('GEOPRIV', '/tmp/a10-geopriv')
def round_(d, kills, seed):
    random.seed(seed)
    os.makedirs(d, exist_ok=True)
    for f in glob.glob(d + '/*') + glob.glob(d + '/.*'):
        os.remove(f)
    path = d + '/l.json'
    kinds = ['one', 'packed', 'map', 'memo', 'outbox', 'cli']
    procs = []; outs = []
    def start(k):
        o = open(f"{d}/out.{len(outs)}.{k}", 'w'); outs.append((k, o.name))
        if k == 'cli':
            p = subprocess.Popen([CLI, 'privatize', 'kde', '--center', '0,0', '--bandwidth', '1000', '--mechanism', 'polyplace', '--epsilon', '1e-3', '--unit', 'per-metre', '--ledger', path, '--budget-epsilon', '0.1', '--outbox'],
                                 stdin=subprocess.PIPE, stdout=o, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                p.stdin.write(b''.join(b'%d,5\n' % i for i in range(60))); p.stdin.close()
            except BrokenPipeError: pass
        else:
            p = subprocess.Popen([PY, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'kill_writer.py'), path, k, '60'], stdout=o, stderr=subprocess.DEVNULL, env=ENV, start_new_session=True)
        procs.append(p)
    for k in kinds: start(k)
    nk = 0; t0 = time.time()
    while any(p.poll() is None for p in procs) and time.time() - t0 < 120:
        time.sleep(random.uniform(0.02, 0.3))
        live = [p for p in procs if p.poll() is None]
        if nk < kills and live:
            v = random.choice(live); os.killpg(v.pid, signal.SIGKILL); v.wait(); nk += 1
            start(random.choice(kinds))
    for p in procs:
        if p.poll() is None: os.killpg(p.pid, signal.SIGKILL); p.wait()
    received = 0; errs = []; outbox_cli = 0; outbox_py = 0
    for k, name in outs:
        for line in open(name):
            if k == 'cli':
                if line.startswith('{'): received += 1; outbox_cli += 1
            elif line.startswith('ERR'): errs.append(line.strip())
            else:
                kk, c = line.split(); received += int(c)
                if kk == 'outbox': outbox_py += 1
    st = json.load(open(path))
    rel = st['releases']; spent = st.get('spent_epsilon')
    ob = len(st.get('outbox') or [])
    nxt = subprocess.run([CLI, 'privatize', 'kde', '--center', '0,0', '--bandwidth', '1000', '--mechanism', 'polyplace', '--epsilon', '1e-3', '--unit', 'per-metre', '--ledger', path, '--budget-epsilon', '0.1'], input=b'1,1\n', capture_output=True)
    tmps = len(glob.glob(d + '/.l.json.*.tmp'))
    ok = received <= rel <= 100 and float(spent) <= 0.1 * (1 + 2**-50) and nxt.returncode in (0, 3) and not errs and (kills > 0 or received == rel) and ob >= outbox_cli + outbox_py
    print(f"round {seed}: kills {nk} received {received} recorded {rel} spent {spent} outbox {ob} (printed cli {outbox_cli} py {outbox_py}) next rc {nxt.returncode} tmp {tmps} errs {errs[:3]} {'OK' if ok else 'BAD'}", flush=True)
    return ok
mode, rounds = sys.argv[1], int(sys.argv[2])
bad = 0
for r in range(rounds):
    bad += not round_(os.environ.get('A10_DIR', '/tmp/a10/kill/r'), 0 if mode == 'race' else 8, r)
print('bad', bad, 'of', rounds)
