# Spark vs `geopriv aggregate` past the id bound (2^20 ids per server).
import sys, time, os
from pyspark.sql import SparkSession
from geopriv.spark import aggregate
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "2g").config("spark.pyspark.python", sys.executable).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.option("lineSep", "\n").text(sys.argv[1])
if len(sys.argv) > 2: df = df.repartition(int(sys.argv[2]))  # (not used: repartition reorders rows)
t = time.time()
r = aggregate(df)
print(f"partitions {r.partitions} accepted {r.accepted} duplicates {r.duplicates} rejected {r.rejected} ({time.time()-t:.1f} s)")
open("spark.txt", "w").write(r.to_json_lines())
spark.stop()
