#!/usr/bin/env bash
# Regenerates the committed Kotlin, Swift and Python bindings from the
# built library (uniffi library mode: the interface is read from metadata
# the proc-macros embed in the cdylib; there is no UDL file).
#
#   bindings/scripts/generate.sh           rewrite bindings/{kotlin,swift,python}
#   bindings/scripts/generate.sh --check   regenerate into a temp dir and fail
#                                           if the committed files differ
#
# --no-format keeps the output independent of ktlint/swiftformat/black
# being installed, so the check is reproducible on any machine.
set -euo pipefail
source "$(dirname "$0")/common.sh"

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

build_ffi

generate_into() {
  local out="$1" lang
  for lang in kotlin swift python; do
    rm -rf "${out:?}/$lang"
    mkdir -p "$out/$lang"
    "$BINDGEN" generate --no-format --metadata-no-deps \
      --language "$lang" --out-dir "$out/$lang" "$FFI_LIB" >/dev/null
  done
}

if $check; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  generate_into "$tmp"
  stale=false
  for lang in kotlin swift python; do
    if ! diff -r "$REPO/bindings/$lang" "$tmp/$lang" >"$tmp/$lang.diff"; then
      stale=true
      echo "stale: bindings/$lang differs from what the library generates:" >&2
      head -n 40 "$tmp/$lang.diff" >&2
    fi
  done
  if $stale; then
    echo "error: the committed bindings are stale; run bindings/scripts/generate.sh and commit the result" >&2
    exit 1
  fi
  echo "generated bindings are up to date (kotlin, swift, python)"
else
  generate_into "$REPO/bindings"
  echo "regenerated bindings/kotlin, bindings/swift, bindings/python"
fi
