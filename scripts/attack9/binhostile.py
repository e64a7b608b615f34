# Hostile binary upload bodies for the collector's octet-stream path.
# binhostile.py GOOD.bin OUTDIR: writes OUTDIR/batch-K.bin (<=1000 records each) and
# OUTDIR/expect.json (ids expected accepted, in order, first occurrence).
import sys, struct, random, binascii, json, os
random.seed(9)
def cobs_dec(f):
    out=bytearray(); i=0
    while i<len(f):
        c=f[i]; out+=f[i+1:i+c]; i+=c
        if c<255 and i<len(f): out.append(0)
    return bytes(out)
def cobs_enc(b):
    out=bytearray(); blk=bytearray()
    for x in b:
        if x==0:
            out.append(len(blk)+1); out+=blk; blk=bytearray()
        else:
            blk.append(x)
            if len(blk)==254: out.append(255); out+=blk; blk=bytearray()
    out.append(len(blk)+1); out+=blk
    return bytes(out)
def crc(b): return binascii.crc_hqx(b,0xFFFF).to_bytes(2,'big')
raws=[cobs_dec(f) for f in open(sys.argv[1],'rb').read().split(b'\0') if f]
assert all(len(r)==63 and r[0]==3 for r in raws), set(len(r) for r in raws)
VAL=slice(35,43); ID=slice(44,60)
def with_value(raw, v):
    b=bytearray(raw[:61]); b[VAL]=struct.pack('<d',v); return bytes(b)+crc(bytes(b))
recs=[]; exp=[]  # exp: id hex or None (refused)
seen=set()
def ok(raw, rec=None):
    recs.append(cobs_enc(raw) if rec is None else rec)
    i=raw[ID].hex(); exp.append(i)
def bad(rec): recs.append(rec); exp.append(None)
for k,raw in enumerate(raws):
    r=random.random()
    if r<0.55: ok(raw)
    elif r<0.60: ok(raws[random.randrange(len(raws))])   # replay (maybe of a later one)
    elif r<0.64:                                         # special finite values, CRC fixed
        v=random.choice([-0.0, 0.0, 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308, 1e300, 2.2250738585072014e-308])
        ok(with_value(raw, v))
    elif r<0.68: bad(cobs_enc(with_value(raw, random.choice([float('nan'), float('inf'), -float('inf')]))))
    elif r<0.72:
        b=bytearray(raw); b[random.randrange(63)]^=random.randrange(1,256); bad(cobs_enc(bytes(b)))
    elif r<0.76: bad(cobs_enc(raw[:random.randrange(1,63)]))
    elif r<0.78: bad(cobs_enc(raw+raws[0]))
    elif r<0.80: bad(cobs_enc(b'\x83\x00'+raw[1:61]+crc(b'\x83\x00'+raw[1:61])))  # non-canonical version
    elif r<0.84:                                          # legacy v2 unseeded (read, no check)
        b=bytearray(raw[:60]); b[0]=2; ok(bytes(b))
    elif r<0.86:                                          # legacy v2 seeded: refused (seeded)
        b=bytearray(raw[:60]); b[0]=2; bad(cobs_enc(bytes(b)+b'\x01'))
    elif r<0.88:                                          # v3 seeded, CRC fixed: refused (seeded)
        b=bytearray(raw[:61]); b[60]=1; bad(cobs_enc(bytes(b)+crc(bytes(b))))
    elif r<0.90:                                          # v3 without report id: missing-report-id
        b=bytearray(raw[:43]); b+=b'\x00\x00'; bad(cobs_enc(bytes(b)+crc(bytes(b))))
    elif r<0.92: bad(bytes(random.randrange(1,256) for _ in range(random.randrange(1,200))))  # raw garbage, no zero
    elif r<0.94: bad(b'')                                 # empty record (two zeros)
    elif r<0.96:                                          # epsilon changed by one ulp: task-mismatch
        b=bytearray(raw[:61]); e=struct.unpack('<d',bytes(b[19:27]))[0] if False else None
        bad(cobs_enc(with_value(raw, 0.5)[:0]+bytes([4])+raw[1:]))  # unsupported version 4
    else: ok(raw[:61]+crc(raw[:61]))                      # the same frame re-checked (identical)
out=sys.argv[2]; os.makedirs(out, exist_ok=True)
for j in range(0, len(recs), 1000):
    open(f"{out}/batch-{j//1000:04d}.bin",'wb').write(b''.join(x+b'\0' for x in recs[j:j+1000]))
acc=[]
for i in exp:
    if i and i not in seen: seen.add(i); acc.append(i)
json.dump({"records": len(recs), "accepted_ids": acc, "refused": sum(1 for e in exp if e is None)}, open(f"{out}/expect.json","w"))
print(len(recs), "records,", len(acc), "distinct ids expected stored,", sum(1 for e in exp if e is None), "refused")
