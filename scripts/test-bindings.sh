#!/usr/bin/env bash
# Tests of the foreign-language bindings (crate geopriv-ffi in bindings/):
#   1. the committed Kotlin/Swift/Python sources match what the library
#      generates (else: run bindings/scripts/generate.sh and commit),
#   2. Kotlin on the JVM through JNA (bindings/scripts/test-kotlin.sh),
#   3. Python through ctypes (bindings/scripts/test-python.sh).
# Installs what it needs (JNA from Debian, kotlinc from npm, cached).
# Called by scripts/test-all.sh; safe to re-run, fast the second time.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "-- bindings: generated sources up to date"
bindings/scripts/generate.sh --check
echo "-- bindings: Kotlin/JVM"
bindings/scripts/test-kotlin.sh
echo "-- bindings: Python"
bindings/scripts/test-python.sh
