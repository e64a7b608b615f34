#!/usr/bin/env bash
# Kotlin/JVM test of the bindings: compiles bindings/tests/kotlin/Main.kt (and
# Server.kt, the hardened server, run as its own program) with
# the generated bindings/kotlin sources against JNA, and runs it on the JVM
# with the cdylib built from this checkout. Installs what it needs on a fresh
# Debian machine (Java 17 must be present):
#   * JNA from Debian (libjna-java, /usr/share/java/jna.jar),
#   * the Kotlin compiler from the npm package `kotlin-compiler`, which ships
#     kotlinc and kotlin-stdlib, cached in $GEOPRIV_CACHE_DIR (default
#     ~/.cache/geopriv) so the second run does not reinstall it.
# The README's Android example must be the copy in Main.kt (checked first).
# The compiled test jar is cached by a hash of its sources, so an unchanged
# second run skips kotlinc. Prints "kotlin: N passed, M failed" last.
set -euo pipefail
source "$(dirname "$0")/common.sh"

ensure_kotlin

check_readme_example bindings/tests/kotlin/Main.kt
build_ffi

SOURCES=("$REPO/bindings/kotlin/geopriv/geopriv_ffi.kt" "$REPO/bindings/extensions/kotlin/geopriv/ErrorCode.kt"
  "$REPO/bindings/tests/kotlin/Main.kt"
  "$REPO/bindings/tests/kotlin/Server.kt"
  "$REPO/bindings/tests/kotlin/MapTest.kt")
# The map suite compares with `geopriv map aggregate` (the debug CLI).
(cd "$REPO" && cargo build --quiet --profile test -p geopriv-cli --bin geopriv)
OUT="$TARGET_DIR/geopriv-ffi-tests/kotlin"
mkdir -p "$OUT"
hash="$( { echo "$KOTLIN_COMPILER_VERSION"; sha256sum "$JNA_JAR" "${SOURCES[@]}"; } | sha256sum | cut -c1-16)"
JAR="$OUT/tests-$hash.jar"
if [ ! -f "$JAR" ]; then
  rm -f "$OUT"/tests-*.jar
  "$KOTLINC" -nowarn -cp "$JNA_JAR" -d "$JAR.tmp.jar" "${SOURCES[@]}" 2>&1 \
    | grep -v '^info: \|^warning: ' >&2 || true
  [ -f "$JAR.tmp.jar" ] || { echo "error: kotlinc failed" >&2; exit 1; }
  mv "$JAR.tmp.jar" "$JAR"
fi

# jna.library.path: where JNA finds libgeopriv_ffi.so (uniffi loads it by
# the name "geopriv_ffi").
java -Djna.library.path="$(dirname "$FFI_LIB")" \
  -cp "$JAR:$JNA_JAR:$STDLIB" MainKt
# The hardened server (ReportServer; bindings/tests/kotlin/Server.kt).
java -Djna.library.path="$(dirname "$FFI_LIB")" \
  -cp "$JAR:$JNA_JAR:$STDLIB" servertests.ServerKt
GEOPRIV_CLI="$TARGET_DIR/debug/geopriv" java -Djna.library.path="$(dirname "$FFI_LIB")" \
  -cp "$JAR:$JNA_JAR:$STDLIB" maptest.MapTestKt
