# Shared by the bindings scripts (sourced, not run). Builds the FFI library
# and the bindgen once, with the same features, so every script reuses one
# artifact, and sets:
#   REPO        the workspace root
#   TARGET_DIR  cargo's target directory (respects CARGO_TARGET_DIR)
#   FFI_LIB     the built cdylib (libgeopriv_ffi.so / .dylib)
#   BINDGEN     the uniffi-bindgen binary built from this crate
#   CACHE_DIR   where downloaded tools are kept between runs
# shellcheck shell=bash

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$REPO/$TARGET_DIR" ;; esac
# shellcheck disable=SC2034 # used by the scripts that source this file
CACHE_DIR="${GEOPRIV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/geopriv}"

case "$(uname -s)" in
  Darwin) FFI_LIB_NAME=libgeopriv_ffi.dylib ;;
  *) FFI_LIB_NAME=libgeopriv_ffi.so ;;
esac

# Debug (dev-profile) build: `--features cli` changes the features of shared
# dependencies (serde, rand), so it cannot reuse the `test`-profile core that
# `cargo test --workspace` compiled; at opt-level 0 the second build of the
# core is the cheap one (measured: an opt-level-3 rebuild took 15 min under load).
# `--features cli` builds the bindgen in the same cargo invocation, so the
# library and the generator come from one feature set (no rebuild between
# scripts; cargo is a no-op on the second call).
build_ffi() {
  local log
  log="$(mktemp)"
  # Quiet unless it fails (warnings of crates under construction are noise here).
  if ! (cd "$REPO" && cargo build --quiet -p geopriv-ffi --features cli --lib --bin uniffi-bindgen) 2>"$log"; then
    cat "$log" >&2
    rm -f "$log"
    echo "error: building geopriv-ffi failed" >&2
    exit 1
  fi
  rm -f "$log"
  FFI_LIB="$TARGET_DIR/debug/$FFI_LIB_NAME"
  BINDGEN="$TARGET_DIR/debug/uniffi-bindgen"
  [ -f "$FFI_LIB" ] || { echo "error: $FFI_LIB was not built" >&2; exit 1; }
  [ -x "$BINDGEN" ] || { echo "error: $BINDGEN was not built" >&2; exit 1; }
}

# apt-get install, running `apt-get update` first only if the package is
# not found (a fresh machine has no package lists). Uses sudo when not root.
apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 || {
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq "$@" >/dev/null
  }
}

# check_readme_example PATH [README]: the code block that follows the line
# `<!-- tested: PATH -->` in README (default bindings/README.md; relative
# to the repository) must appear verbatim in PATH (a test source), its
# `import`/`from`/`use` lines aside, so the README shows exactly the code
# the tests compile and run.
#
# PATH#NAME marks a second block copied from the same file
# (`<!-- tested: PATH#NAME -->`).
check_readme_example() {
  local path="$1" readme="${2:-bindings/README.md}" block content
  block="$(awk -v marker="<!-- tested: $path -->" '
      $0 == marker { found = 1; next }
      found && /^```/ { if (inside) exit; inside = 1; next }
      inside { print }' "$REPO/$readme" \
    | grep -v -E '^(import|from|use) ' | sed '/./,$!d')"
  if [ -z "$block" ]; then
    echo "error: $readme has no code block marked <!-- tested: $path -->" >&2
    exit 1
  fi
  content="$(cat "$REPO/${path%%#*}")"
  if [[ "$content" != *"$block"* ]]; then
    echo "error: the $readme example marked <!-- tested: $path --> differs from its copy in $path; keep them identical" >&2
    exit 1
  fi
}

# ensure_kotlin: Java, JNA and the Kotlin compiler, installed when missing
# (shared by test-kotlin.sh and build-jar.sh). Sets KOTLIN_COMPILER_VERSION,
# JNA_JAR, KOTLINC and STDLIB (kotlin-stdlib.jar).
ensure_kotlin() {
  KOTLIN_COMPILER_VERSION=2.4.20
  JNA_JAR="${JNA_JAR:-/usr/share/java/jna.jar}"

  command -v java >/dev/null || { echo "error: java not found (the JVM tests need Java 17+)" >&2; exit 1; }

  if [ ! -f "$JNA_JAR" ]; then
    echo "installing JNA (Debian libjna-java)"
    apt_install libjna-java
  fi

  KOTLIN_HOME="$CACHE_DIR/kotlin-compiler-$KOTLIN_COMPILER_VERSION/node_modules/kotlin-compiler"
  if [ ! -x "$KOTLIN_HOME/bin/kotlinc" ]; then
    command -v npm >/dev/null || apt_install npm
    echo "installing kotlin-compiler $KOTLIN_COMPILER_VERSION from npm into $CACHE_DIR"
    mkdir -p "$CACHE_DIR/kotlin-compiler-$KOTLIN_COMPILER_VERSION"
    npm install --silent --no-audit --no-fund --no-save \
      --prefix "$CACHE_DIR/kotlin-compiler-$KOTLIN_COMPILER_VERSION" \
      "kotlin-compiler@$KOTLIN_COMPILER_VERSION" >/dev/null 2>&1
  fi
  KOTLINC="$KOTLIN_HOME/bin/kotlinc"
  STDLIB="$KOTLIN_HOME/lib/kotlin-stdlib.jar"
  [ -f "$STDLIB" ] || { echo "error: $STDLIB missing from the kotlin-compiler package" >&2; exit 1; }
}
