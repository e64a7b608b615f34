# Hostile mix for geopriv aggregate (JSON lines). Deterministic.
import random, sys
random.seed(8)
H='{"version":2,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.0001,"delta":0.0,"value":%s%s%s}'
def line(v, rid=None, extra=""):
    return H % (repr(v), (',"report_id":"%s"' % rid) if rid is not None else "", extra)
N=int(sys.argv[1])
ids=[]
out=[]
for k in range(N):
    v=random.choice([0.5,-0.25,random.uniform(-3,3), 1e300, -1e300, 5e-324, 0.0])
    r=random.random()
    if r<0.55:
        rid="%032x"%random.getrandbits(128); ids.append(rid); out.append(line(v,rid))
    elif r<0.70 and ids:   # exact replay, maybe different value
        out.append(line(v, random.choice(ids)))
    elif r<0.78 and ids:   # replay in uppercase
        out.append(line(v, random.choice(ids).upper()))
    elif r<0.80 and ids:   # replay with \u escape for the first digit
        i=random.choice(ids); out.append(line(v, "\\u%04x"%ord(i[0]) + i[1:]))
    elif r<0.83:   # malformed ids
        i="%032x"%random.getrandbits(128)
        bad=random.choice([i[:31], i+"0", "g"+i[1:], i[:16]+" "+i[17:], ""])
        out.append(line(v,bad))
    elif r<0.86 and ids:   # duplicated key
        out.append(line(v, random.choice(ids), ',"report_id":"%032x"' % random.getrandbits(128)))
    elif r<0.90:   # no id
        out.append(line(v))
    elif r<0.93:   # null id
        out.append(line(v).replace(',"value"', ',"report_id":null,"value"'))
    elif r<0.96 and ids:   # id first in the object (non canonical order), replay
        out.append('{"report_id":"%s",' % random.choice(ids) + line(v)[1:])
    else:   # hostile numbers in value
        s=random.choice(["-0","-0.0","1e400","1e","00.5",".5","5.","9007199254740993e-22","1E22","123456789012345678901234e-24","2.4703282292062328e-324"])
        out.append(H % (s,"",""))
sys.stdout.write("\n".join(out)+"\n")
