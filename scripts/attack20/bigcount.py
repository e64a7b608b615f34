# bigcount.py E [moments]: one state of task `atoms` (stateA.json's definition) whose single period holds one bin with count 2^E
# (accepted = n = 2^E); `geopriv-serve merge --tasks tasks.json --task atoms bigE.json` then takes CPU linear in 2^E (ATTACK-20 F3)
import json, sys, copy
e = int(sys.argv[1]); c = 2**e
A = json.load(open("stateA.json"))
b = A["periods"][0]["map"]["bins"][0][0]
s = copy.deepcopy(A); p = s["periods"][0]; p["n"] = c
p["map"] = {"accepted": c, "bins": [[b, c]], "outside": 0}
if len(sys.argv) > 2: p["map"]["moments"] = []
json.dump(s, open(f"big{e}.json", "w"))
