# hostile.py HONEST.jsonl OUTDIR: forged a-priori reports for the honest reports' map (same set id and ε), each with a fresh report_id
import json, sys
L = json.loads(open(sys.argv[1]).readline()); s, e, d = L["set"], L["epsilon"], sys.argv[2]
def rep(x, y, i): return json.dumps({"set": s, "mechanism": "a_priori", "epsilon": e, "location": [x, y], "report_id": "%032x" % (0xabc000000 + i)})
def put(name, lines): open(f"{d}/{name}.jsonl", "w").write("\n".join(lines) + "\n")
for m in (100, 1000, 3000, 10000): put(f"far{m}", [rep(1e12, 1e12, i) for i in range(m)])   # far beyond any honest noise
put("far1e300", [rep(1e300, -1e300, i) for i in range(3)])
put("flood", [rep(10000.0, 10000.0, i) for i in range(100)])       # 100 coincident reports inside the box
put("edge", [rep(0.0, 0.0, i) for i in range(100)])                # 100 at the box's corner
put("replay", [l.rstrip("\n") for l in open(sys.argv[1]).readlines()[:100]] * 50)  # the same 100 lines 50 times
odd = [[20000.0, 20000.0], [20000.000000001, 0], [-0.0, -0.0], [5e-324, 5e-324], [-1e-320, 10000], [1.7976931348623157e308, 0],
       [-1.7976931348623157e308, -1.7976931348623157e308], [10000 + 1e-9, 10000], [9999.999999999998, 10000.000000000002]]
put("odd", [rep(x, y, 0x100000 + 100*i + j) for i, (x, y) in enumerate(odd) for j in range(30)])
for m in (100, 1000, 5000): put(f"atom{m}", [rep(7791.0 + 14*(i % 2), 12345.0, 0x200000 + i) for i in range(m)])
