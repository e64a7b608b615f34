#!/usr/bin/env bash
# Runs every test of the project on a fresh machine (the README "all tests"
# command). Installs what the tests need by itself; safe to re-run.
#
# One build serves every step: the tests, the benchmarks, the CLI used by the digest guard and the binding tests, and
# the FFI library are all compiled once, with the `test` profile
# (opt-level 3) and the feature set of `cargo test --workspace`; the scripts
# below ask for `--profile test`, so cargo finds them fresh instead of
# compiling the workspace again in the dev profile.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
stamp() { echo "== $1 ($(( SECONDS - start )) s so far)"; }

stamp "formatting"
cargo fmt --all -- --check

stamp "clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

stamp "core crate without std (no_std + libm)"
cargo build -p geopriv --no-default-features

stamp "unit and integration tests (examples built)"
cargo test --workspace --lib --bins --tests --examples

stamp "benchmarks compile (same profile and features: only the bench targets are new)"
cargo test --workspace --benches --no-run

stamp "doc tests (the README's Rust example among them)"
cargo test --workspace --doc

stamp "no behaviour change: seeded outputs against scripts/digests/ci.sha256"
scripts/check-digests.sh

for step in scripts/test-bindings.sh:"bindings (Kotlin on the JVM, Python)" \
            scripts/test-packages.sh:"packages (Python wheel, JVM jar, Spark: local mode and a localhost cluster)" \
            scripts/test-collector.sh:"collector (geopriv serve on SQLite: HTTP, kill -9, full disk, fuzz, Chromium)"; do
  script="${step%%:*}"
  if [ -x "$script" ]; then
    stamp "${step#*:}"
    "$script"
  fi
done
stamp "done"
echo "all test suites passed"
