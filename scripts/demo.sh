#!/usr/bin/env bash
# The README's demo: build the CLI in release, then run the geo-private
# kernel density map of the bundled US airports end to end (devices
# privatize, the server aggregates) and print where the table and the
# pictures are. Extra arguments go to `geopriv demo` (see --help). The demo
# rewrites its own out/demo on every run (--force: `geopriv demo` alone
# refuses a directory that holds files).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p geopriv-cli
exec target/release/geopriv demo --force "$@"
