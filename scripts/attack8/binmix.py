import random, sys
random.seed(10)
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
fr=[f for f in open(sys.argv[1] if len(sys.argv) > 1 else 'good.bin','rb').read().split(b'\0') if f]
raws=[cobs_dec(f) for f in fr]
assert all(len(r)==63 for r in raws), set(len(r) for r in raws)
assert all(cobs_enc(r)==f for r,f in zip(raws,fr))
out=[]; exp=[]  # exp: ('ok',id) or ('bad',)
for k in range(120000):
    r=random.random(); raw=random.choice(raws[:40000]) if r<0.4 else raws[k%60000]
    if r<0.6:
        out.append(cobs_enc(raw)); exp.append(('ok',raw[44:60]))
    elif r<0.7:  # one byte damaged
        b=bytearray(raw); p=random.randrange(63); b[p]^=random.randrange(1,256)
        out.append(cobs_enc(bytes(b))); exp.append(('bad',))
    elif r<0.8:  # cut raw
        n=random.randrange(1,63); out.append(cobs_enc(raw[:n])); exp.append(('bad',))
    elif r<0.85:  # glued raw
        out.append(cobs_enc(raw+random.choice(raws))); exp.append(('bad',))
    elif r<0.9:  # seeded byte flipped 1->0 with crc recomputed? (forger) : skip; v2 legacy frame: version 2, no crc, seeded byte
        b=bytearray(raw[:60]); b[0]=2; out.append(cobs_enc(bytes(b)+b'\x01')); exp.append(('ok',raw[44:60]))
    elif r<0.95:  # legacy v2 seeded cut by last byte -> reads as unseeded (refused? policy refuses seeded unless --accept-seeded)
        b=bytearray(raw[:60]); b[0]=2; out.append(cobs_enc(bytes(b))); exp.append(('unseeded',raw[44:60]))
    else:  # non-canonical version varint 0x83 0x00 with recomputed crc
        import binascii
        body=b'\x83\x00'+raw[1:61]
        crc=binascii.crc_hqx(body,0xFFFF)
        out.append(cobs_enc(body+crc.to_bytes(2,'big'))); exp.append(('ok',raw[44:60]))
sys.stdout.buffer.write(b''.join(o+b'\0' for o in out))
# oracle with --accept-seeded
seen=set(); acc=rej=dup=0
for e in exp:
    if e[0]=='bad': rej+=1; continue
    if e[1] in seen: dup+=1; continue
    seen.add(e[1]); acc+=1
print(f"oracle(accept-seeded): accepted {acc} rejected {rej} dup {dup}", file=sys.stderr)
