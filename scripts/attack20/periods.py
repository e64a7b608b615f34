# periods.py K [moments|none]: one forged state with K tiny periods (one report each), to measure merge's memory per period
import json, sys
K = int(sys.argv[1]); mom = sys.argv[2] == "moments"
A = json.load(open("stateA.json"))
ps = []
for k in range(K):
    m = {"accepted": 1, "bins": [[66612, 1]], "outside": 0}
    if mom: m["moments"] = []
    ps.append({"start": 86400 * (k + 1), "n": 1, "map": m})
print(json.dumps({"definition": A["definition"], "periods": ps}))
