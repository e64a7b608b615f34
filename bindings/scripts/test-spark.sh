#!/usr/bin/env bash
# Spark test of geopriv.spark (bindings/tests/python/test_spark.py): PySpark
# 4 (pinned in packages.sh) on Java 17+, in local mode and on a standalone cluster
# (a master and two workers on 127.0.0.1, started and stopped by the test),
# with GEOPRIV_SPARK_REPORTS reports (default 10^6), compared bit for bit
# with `geopriv aggregate` (the release CLI) on the same reports.
# Installs what a fresh Debian machine lacks: Java 17 (apt), python3-venv
# (apt), pyspark (PyPI, into a venv cached in $CACHE_DIR); the wheel is
# built by maturin (test-wheel.sh's build) and installed into that venv.
# Prints the local-mode throughput and "spark: N passed, M failed".
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"

check_readme_example bindings/tests/python/test_spark.py README.md
ensure_java17
make_venv "$CACHE_DIR/venv-pyspark-$PYSPARK_VERSION" "pyspark==$PYSPARK_VERSION"
VENV="$CACHE_DIR/venv-pyspark-$PYSPARK_VERSION"
[ -n "${WHEEL:-}" ] || build_wheel
"$VENV/bin/pip" install -q --no-index --no-deps --force-reinstall "$WHEEL"

log="$(mktemp)"
if ! (cd "$REPO" && cargo build --quiet --release -p geopriv-cli) 2>"$log"; then
  cat "$log" >&2
  exit 1
fi
rm -f "$log"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp "$REPO/bindings/tests/python/test_spark.py" "$REPO/bindings/tests/python/harness.py" "$WORK/"
cd "$WORK"
env -u PYTHONPATH -u SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 GEOPRIV_CLI="$TARGET_DIR/release/geopriv" GEOPRIV_SPARK_WORK="$WORK" \
  PYSPARK_PYTHON="$VENV/bin/python" PYTHONDONTWRITEBYTECODE=1 \
  "$VENV/bin/python" -I test_spark.py
