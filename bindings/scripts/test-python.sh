#!/usr/bin/env bash
# Python test of the bindings: the committed, uniffi-generated module
# bindings/python/geopriv_ffi.py loads libgeopriv_ffi.so from its own
# directory (ctypes), so the module is copied and the library linked into
# one directory under the target dir, and
# bindings/tests/python/test_bindings.py runs there with plain python3
# (standard library only; no pytest). The README's server example must be
# the copy in the test (checked first). Prints "python: N passed, M failed"
# last.
set -euo pipefail
source "$(dirname "$0")/common.sh"

command -v python3 >/dev/null || apt_install python3

check_readme_example bindings/tests/python/test_bindings.py
build_ffi

OUT="$TARGET_DIR/geopriv-ffi-tests/python"
mkdir -p "$OUT"
cp "$REPO/bindings/python/geopriv_ffi.py" "$OUT/"
ln -sf "$FFI_LIB" "$OUT/"

# The map suite compares the server's maps with `geopriv map aggregate`
# (the debug CLI: `cargo test --workspace` has built it already).
(cd "$REPO" && cargo build --quiet --profile test -p geopriv-cli --bin geopriv)

cd "$OUT"
PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 python3 "$REPO/bindings/tests/python/test_bindings.py"
PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 python3 "$REPO/bindings/tests/python/test_server.py"
PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 python3 "$REPO/bindings/tests/python/test_ledger_processes.py"
GEOPRIV_CLI="$TARGET_DIR/debug/geopriv" PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 \
  python3 "$REPO/bindings/tests/python/test_map.py"
