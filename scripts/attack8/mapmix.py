import random, sys, json, re
random.seed(11)
src=[l.rstrip('\n') for _,l in zip(range(200000), open('/tmp/ms3-rep-1.jsonl'))]
HEX=re.compile(r'^[0-9a-fA-F]{32}$')
out=[]; clean=[]; seen=set()
def emit(line, ok_obj):
    out.append(line)
    if ok_obj is None: return
    rid=ok_obj.get("report_id")
    if rid is not None:
        k=rid.lower()
        if k in seen: return
        seen.add(k)
    clean.append(json.dumps(ok_obj, separators=(',',':')))
for k in range(300000):
    r=random.random()
    base=src[k % len(src)] if r<0.5 else random.choice(src[:50000])
    o=json.loads(base)
    if r<0.7:
        emit(base,o)
    elif r<0.75:
        o2=dict(o); o2["report_id"]=o["report_id"].upper(); emit(json.dumps(o2,separators=(',',':')), o2)
    elif r<0.8:
        emit(base.replace('"report_id":"'+o["report_id"], '"report_id":"'+o["report_id"][:31]), None)
    elif r<0.83:
        emit(base[:-1]+',"report_id":"%032x"}' % random.getrandbits(128), None)
    elif r<0.88:
        # hostile number spellings of the same location (must parse the same)
        x,y=o["location"]
        sx=random.choice(["%.17e"%x, "%.25f"%x, "%se0"%repr(x), "%sE-0"%repr(x), "%s000000000000000000000"%repr(x) if '.' in repr(x) else repr(x)])
        line=base.replace(json.dumps(o["location"],separators=(',',':')), "[%s,%s]"%(sx,repr(y)))
        o2=dict(o); o2["location"]=[float(sx), y]
        emit(line,o2)
    elif r<0.92:
        x,y=o["location"]
        bad=random.choice(["1e400","-1e400","1e",".5","5.","00.5","NaN","Infinity","-0x1"])
        emit(base.replace(json.dumps(o["location"],separators=(',',':')), "[%s,%s]"%(bad,repr(y))), None)
    elif r<0.96:
        # far outside the box / exactly on huge values (valid JSON, valid report?) -> let CLI decide; skip from clean via marking unknown
        o2=dict(o); o2["location"]=[random.choice([-1e300,1e300,-0.0,5e-324,1e15]), o["location"][1]]; del o2["report_id"]
        out.append(json.dumps(o2,separators=(',',':'))); clean.append(json.dumps(o2,separators=(',',':')))
    else:
        o2=dict(o); del o2["report_id"]; emit(json.dumps(o2,separators=(',',':')), o2)
open('mapmix.jsonl','w').write('\n'.join(out)+'\n')
open('mapclean.jsonl','w').write('\n'.join(clean)+'\n')
print(len(out), len(clean))
