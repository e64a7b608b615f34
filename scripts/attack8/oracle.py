import json, re, sys
HEX=re.compile(r'^[0-9a-fA-F]{32}$')
def pairs(ps):
    keys=[k for k,_ in ps]
    if len(keys)!=len(set(keys)): raise ValueError("dup")
    return dict(ps)
def bad_const(s): raise ValueError(s)
acc=rej=dup=0; seen=set(); L=int(sys.argv[1]); after=0
for ln in open(sys.argv[2]):
    ln=ln.strip()
    try:
        # JSON grammar of the value token checked by python's json (it refuses .5, 5., 1e, 00.5)
        o=json.loads(ln, object_pairs_hook=pairs, parse_constant=bad_const)
        v=float(o["value"])
        if v!=v or v in (float('inf'),float('-inf')): raise ValueError
        rid=o.get("report_id")
        if rid is not None and not (isinstance(rid,str) and HEX.match(rid)): raise ValueError
    except Exception:
        rej+=1; continue
    if rid is not None:
        k=rid.lower()
        if k in seen: dup+=1; continue
        if len(seen)<L: seen.add(k)
        else: after+=1
    acc+=1
print(f"accepted {acc} rejected {rej} dup {dup} after {after}")
