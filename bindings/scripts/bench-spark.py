"""Throughput of ``geopriv.spark.aggregate`` in local mode (BENCHMARKS.md).

    python bench-spark.py GEOPRIV_CLI N [extra aggregate kwargs as k=v ...]

Makes N seeded threshold reports with the CLI (``privatize --unmetered``),
starts ``local[2]``, reads them once, then times ``aggregate`` and prints
reports/s. Time the whole process with ``/usr/bin/time -v`` as well (JVM
start and report generation included). ``GEOPRIV_SPARK_MODULE`` names
another module providing ``aggregate`` (e.g. an older ``spark.py``) to
compare versions on the same wheel.
"""

import importlib
import os
import random
import subprocess
import sys
import tempfile
import time

cli, n = sys.argv[1], int(sys.argv[2])
kwargs = dict(max_epsilon=1e-3, max_delta=1e-6, accept_seeded=True)
for arg in sys.argv[3:]:
    k, v = arg.split("=", 1)
    kwargs[k] = {"True": True, "False": False}.get(v, v)
aggregate = importlib.import_module(os.environ.get("GEOPRIV_SPARK_MODULE", "geopriv.spark")).aggregate

work = tempfile.mkdtemp()
path = os.path.join(work, "reports.jsonl")
rnd = random.Random(1)
points = "\n".join(f"{rnd.gauss(80_000, 30_000)}" for _ in range(n)) + "\n"
with open(path, "w") as f:
    subprocess.run([cli, "privatize", "threshold", "--threshold", "100000", "--width", "20000", "--mechanism",
                    "polyplace", "--epsilon", "0.0005", "--unmetered", "--seed", "3"],
                   input=points, stdout=f, text=True, check=True)

from pyspark.sql import SparkSession  # noqa: E402

spark = (SparkSession.builder.master("local[2]").appName("geopriv-bench")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.pyspark.python", sys.executable)
         .config("spark.python.worker.reuse", "true").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.text(path)
df.count()
t0 = time.perf_counter()
r = aggregate(df, **kwargs)
seconds = time.perf_counter() - t0
print(f"{n} reports in {seconds:.1f} s = {n / seconds:,.0f} reports/s ({r.partitions} partitions, "
      f"{r.accepted} accepted, load {os.getloadavg()[0]:.1f})", flush=True)
spark.stop()
