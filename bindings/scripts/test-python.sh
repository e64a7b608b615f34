#!/usr/bin/env bash
# Python test of the bindings: the committed, uniffi-generated module
# bindings/python/geopriv_ffi.py loads libgeopriv_ffi.so from its own
# directory (ctypes), so the module is copied and the library linked into
# one directory under the target dir, and
# bindings/tests/python/test_bindings.py runs there with plain python3
# through the package layer (python-package/geopriv), standard library
# only; the array suite test_native.py and the mypy check of the README's
# Python use a cached venv with numpy, pandas, Polars and mypy (PyPI). The README's server example must be
# the copy in the test (checked first). Prints "python: N passed, M failed"
# last.
set -euo pipefail
source "$(dirname "$0")/common.sh"

command -v python3 >/dev/null || apt_install python3

check_readme_example bindings/tests/python/test_bindings.py
check_readme_example "bindings/tests/python/test_bindings.py#memo" README.md
check_readme_example bindings/tests/python/test_server.py
build_ffi

OUT="$TARGET_DIR/geopriv-ffi-tests/python"
mkdir -p "$OUT"
cp "$REPO/bindings/python/geopriv_ffi.py" "$OUT/"
ln -sf "$FFI_LIB" "$OUT/"
# The package as the wheel lays it out (python-package/geopriv + _native),
# so the suites run through the Python layer users get (issue 23).
PKG="$OUT/pkg"
rm -rf "$PKG"
mkdir -p "$PKG/geopriv/_native"
cp "$REPO"/bindings/python-package/geopriv/* "$PKG/geopriv/"
cp "$REPO/bindings/python/geopriv_ffi.py" "$PKG/geopriv/_native/"
touch "$PKG/geopriv/_native/__init__.py"
ln -sf "$FFI_LIB" "$PKG/geopriv/_native/"

# The map suite compares the server's maps with `geopriv map aggregate`
# (the debug CLI: `cargo test --workspace` has built it already).
(cd "$REPO" && cargo build --quiet --profile test -p geopriv-cli --bin geopriv)

# numpy, pandas, Polars and mypy from PyPI for the array suite and the
# type check (cached venv).
source "$(dirname "$0")/packages.sh"
PYDATA="$CACHE_DIR/venv-pydata-1"
make_venv "$PYDATA" numpy pandas polars mypy

cd "$OUT"
through_package() {  # the suites import `geopriv_ffi`: bind it to the package
  PYTHONPATH="$PKG" PYTHONDONTWRITEBYTECODE=1 "$1" -c \
    'import runpy, sys, geopriv; sys.modules["geopriv_ffi"] = geopriv; runpy.run_path(sys.argv[1], run_name="__main__")' "$2"
}
through_package python3 "$REPO/bindings/tests/python/test_bindings.py"
through_package python3 "$REPO/bindings/tests/python/test_server.py"
GEOPRIV_CLI="$TARGET_DIR/debug/geopriv" through_package python3 "$REPO/bindings/tests/python/test_map.py"
# The generated module alone still works (apps that vendor geopriv_ffi.py).
PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 python3 "$REPO/bindings/tests/python/test_server.py"
PYTHONPATH="$OUT" PYTHONDONTWRITEBYTECODE=1 python3 "$REPO/bindings/tests/python/test_ledger_processes.py"
PYTHONPATH="$PKG" PYTHONDONTWRITEBYTECODE=1 "$PYDATA/bin/python" "$REPO/bindings/tests/python/test_native.py"
"$REPO/bindings/scripts/typecheck-python.sh" "$PYDATA/bin/python" "$PKG"
