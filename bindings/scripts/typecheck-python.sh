#!/usr/bin/env bash
# mypy on every ```python block of README.md and bindings/README.md (each
# block a module of its own) and on the Python examples (new_user.py,
# quickstart.py), against a `geopriv` package whose types are
# python-package/geopriv/__init__.pyi (issue 23 item 1).
#
#   bindings/scripts/typecheck-python.sh PYTHON [PACKAGE_ROOT]
#
# PYTHON: an interpreter with mypy installed (test-python.sh and
# test-wheel.sh install it from PyPI); PACKAGE_ROOT: the directory that
# holds the `geopriv` package built from the checkout (omitted: the wheel
# installed in PYTHON's environment).
set -euo pipefail
source "$(dirname "$0")/common.sh"
case "$1" in
  */*) python="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;;
  *) python="$(command -v "$1")" ;;
esac
root="${2:+$(realpath "$2")}"  # empty: the package installed in PYTHON's environment
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" - "$REPO" "$work" <<'PY'
import re, sys, pathlib
repo, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
for readme in ("README.md", "bindings/README.md"):
    for i, block in enumerate(re.findall(r"^```python\n(.*?)^```", (repo / readme).read_text(), re.S | re.M)):
        n += 1
        (out / f"{readme.replace('/', '_').replace('.md', '')}_{i}.py").write_text(block)
print(f"typecheck: {n} README blocks")
PY
cp "$REPO/bindings/tests/python/new_user.py" "$REPO/bindings/tests/python/quickstart.py" "$work/"
cd "$work"
env ${root:+MYPYPATH="$root"} "$python" -m mypy --config-file "$REPO/bindings/mypy.ini" \
  --cache-dir "$TARGET_DIR/mypy-cache" --ignore-missing-imports --follow-imports=silent ./*.py
