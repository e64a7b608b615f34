# geopriv.spark with replays spelled differently across partitions, null ids, hostile rows;
# JSON and binary columns; compared with `geopriv aggregate` on the same rows in the same order.
import sys, json, random, subprocess, struct, binascii
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType, StructField, StringType, BinaryType
from geopriv.spark import aggregate
G = "/tmp/attack9/geopriv"
random.seed(12)
def cli(data, *flags):
    r = subprocess.run([G, "aggregate", *flags], input=data, capture_output=True)
    return r.stdout.decode(), r.stderr.decode().strip().splitlines()[-3:]
good = subprocess.run([G, "privatize", "threshold", "--threshold", "100000", "--width", "20000", "--mechanism", "polyplace",
    "--epsilon", "1e-4", "--unmetered"], input="\n".join(str(60000 + i * 13) for i in range(3000)), capture_output=True, text=True).stdout.split("\n")[:3000]
def esc(s): return "".join("\\u%04x" % ord(c) if random.random() < .5 else c for c in s)
def spell(l):
    X = json.loads(l)["report_id"]; k = random.randrange(7)
    return [l, l.replace(X, X.upper()), l.replace(X, esc(X)), "\ufeff" + l, l + "\u00a0", l.replace('"report_id"', '"report\\u005fid"'),
            '{"report_id":"%s",' % X + l[1:].replace(',"report_id":"%s"' % X, "")][k]
rows = list(good)
noid = [l.replace(',"report_id":"%s"' % json.loads(l)["report_id"], "") for l in good[:50]]
for _ in range(800): rows.insert(random.randrange(len(rows) + 1), spell(random.choice(good)))
for l in noid * 2: rows.insert(random.randrange(len(rows) + 1), l)              # no id: each copy counts
for l in good[100:120]: rows.insert(random.randrange(len(rows) + 1), l.replace('"%s"' % json.loads(l)["report_id"], "null"))
hostile = ["", "#c", "{}", "[]", "null", "x" * 70000, good[0][:-5], good[1] + good[2], "\x1b]0;pwn\x07" + good[3],
           good[4].replace('"value":', '"value":NaN,"v":'), good[5].replace("0.0001", "0.00010000000000000002")]
for h in hostile * 3: rows.insert(random.randrange(len(rows) + 1), h)
assert all("\n" not in r and "\r" not in r for r in rows)
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.pyspark.python", sys.executable).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
want, err = cli(("\n".join(rows) + "\n").encode())
print("CLI:", err)
for k in (1, 3, 7):
    df = spark.createDataFrame(spark.sparkContext.parallelize([(r,) for r in rows], k), StructType([StructField("report", StringType())]))
    r = aggregate(df)
    print(f"json  P={k}: accepted {r.accepted} dup {r.duplicates} rejected {r.rejected} skipped {r.skipped} equal CLI: {r.to_json_lines() == want}")
# nulls only in Spark (the CLI has no null line): counted as rejected empty, estimates unchanged
df = spark.createDataFrame(spark.sparkContext.parallelize([(r,) for r in rows] + [(None,)] * 5, 3), StructType([StructField("report", StringType())]))
r = aggregate(df); print(f"json +5 null rows: accepted {r.accepted} rejected {r.rejected} equal CLI estimates: {r.to_json_lines() == want}")
# binary: v3 frames, legacy v2 copies of the same reports, damaged frames
def cobs(b):
    out = bytearray(); blk = bytearray()
    for x in b:
        if x == 0: out.append(len(blk) + 1); out += blk; blk = bytearray()
        else:
            blk.append(x)
            if len(blk) == 254: out.append(255); out += blk; blk = bytearray()
    out.append(len(blk) + 1); out += blk; return bytes(out)
def uncobs(f):
    out = bytearray(); i = 0
    while i < len(f):
        c = f[i]; out += f[i+1:i+c]; i += c
        if c < 255 and i < len(f): out.append(0)
    return bytes(out)
frames = subprocess.run([G, "privatize", "threshold", "--threshold", "100000", "--width", "20000", "--mechanism", "polyplace",
    "--epsilon", "1e-4", "--unmetered", "--format", "binary"], input="\n".join(str(60000 + i * 13) for i in range(3000)).encode(), capture_output=True).stdout
raws = [uncobs(f) for f in frames.split(b"\0") if f]
brows = list(raws)
for _ in range(600):
    raw = random.choice(raws); b = bytearray(raw[:60]); b[0] = 2
    brows.insert(random.randrange(len(brows) + 1), bytes(b))       # legacy v2 spelling of the same report (same id)
for _ in range(200):
    raw = bytearray(random.choice(raws)); raw[random.randrange(63)] ^= 1 + random.randrange(255)
    brows.insert(random.randrange(len(brows) + 1), bytes(raw))
bwant, berr = cli(b"".join(cobs(b) + b"\0" for b in brows), "--format", "binary")
print("CLI binary:", berr)
for k in (1, 4):
    df = spark.createDataFrame(spark.sparkContext.parallelize([(bytearray(b),) for b in brows], k), StructType([StructField("report", BinaryType())]))
    r = aggregate(df)
    print(f"binary P={k}: accepted {r.accepted} dup {r.duplicates} rejected {r.rejected} equal CLI: {r.to_json_lines() == bwant}")
spark.stop()
