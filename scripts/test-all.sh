#!/usr/bin/env bash
# Runs every test of the project on a fresh machine (the README "all tests"
# command). Installs what the tests need by itself; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== formatting"
cargo fmt --all -- --check

echo "== clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

echo "== core crate without std (no_std + libm)"
cargo build -p geopriv --no-default-features

echo "== benchmarks compile"
cargo bench --workspace --no-run

echo "== unit, integration and doc tests"
cargo test --workspace

echo "== no behaviour change: seeded outputs against scripts/digests/ci.sha256"
scripts/check-digests.sh

if [ -x scripts/test-bindings.sh ]; then
  echo "== bindings (Kotlin on the JVM, Python)"
  scripts/test-bindings.sh
fi
if [ -x scripts/test-packages.sh ]; then
  echo "== packages (Python wheel, JVM jar, Spark: local mode and a localhost cluster)"
  scripts/test-packages.sh
fi
echo "all test suites passed"
