#!/usr/bin/env bash
# Builds the `geopriv` Python wheel (release) with maturin from PyPI
# (bindings/pyproject.toml, uniffi bindings) into target/wheels/ and prints
# its path. `pip install target/wheels/geopriv-*.whl` installs it; add
# `pyspark>=4` (or install `geopriv[spark]`) for geopriv.spark.
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"

build_wheel
echo "$WHEEL"
