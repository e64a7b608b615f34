#!/usr/bin/env bash
# Builds the JVM artifact of the bindings:
#   target/jvm/geopriv-<version>.jar   the generated Kotlin (package geopriv)
#                                      compiled by kotlinc, plus
#                                      linux-x86-64/libgeopriv_ffi.so (the
#                                      release library of the Python wheel)
#                                      where JNA looks on the class path, and
#                                      META-INF/maven/dev.geopriv/geopriv/pom.xml
#   target/jvm/geopriv-<version>.pom   its dependencies (JNA, kotlin-stdlib)
# <version> is the crate's (bindings/Cargo.toml). kotlinc runs only when the
# Kotlin source, the library or the POM changed (hash in the file name of a
# cached copy). Android apps use bindings/scripts/build-android.sh instead
# (per-ABI jniLibs). Prints the jar's path.
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"

ensure_kotlin
[ -n "${WHEEL:-}" ] || build_wheel
ensure_python

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/bindings/Cargo.toml" | head -n1)"
JNA_VERSION="$(python3 -c 'import sys, zipfile; m = zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode(); print(next(l.split(":", 1)[1].strip() for l in m.splitlines() if l.startswith("Bundle-Version")))' "$JNA_JAR")"
OUT="$TARGET_DIR/jvm"
mkdir -p "$OUT/cache"
SRC="$REPO/bindings/kotlin/geopriv/geopriv_ffi.kt"
# Hand-written extensions (GeoprivException.code).
EXT="$REPO/bindings/extensions/kotlin/geopriv/ErrorCode.kt"

# The native library: the wheel's (release, built by maturin).
python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("geopriv/_native/libgeopriv_ffi.so"))' \
  "$WHEEL" >"$OUT/libgeopriv_ffi.so"
sed -e "s/@VERSION@/$VERSION/" -e "s/@JNA_VERSION@/${JNA_VERSION%%.b*}/" -e "s/@KOTLIN_VERSION@/$KOTLIN_COMPILER_VERSION/" \
  "$REPO/bindings/jvm/pom.xml.in" >"$OUT/geopriv-$VERSION.pom"

hash="$( { echo "$KOTLIN_COMPILER_VERSION"; sha256sum "$JNA_JAR" "$SRC" "$EXT" "$OUT/libgeopriv_ffi.so" "$OUT/geopriv-$VERSION.pom"; } | sha256sum | cut -c1-16)"
JAR="$OUT/geopriv-$VERSION.jar"
if [ ! -f "$OUT/cache/$hash.jar" ]; then
  rm -f "$OUT"/cache/*.jar
  "$KOTLINC" -nowarn -cp "$JNA_JAR" -d "$OUT/cache/classes.jar" "$SRC" "$EXT" 2>&1 | grep -v '^info: \|^warning: ' >&2 || true
  [ -f "$OUT/cache/classes.jar" ] || { echo "error: kotlinc failed" >&2; exit 1; }
  python3 - "$OUT/cache/classes.jar" "$OUT/libgeopriv_ffi.so" "$OUT/geopriv-$VERSION.pom" "$VERSION" <<'PY'
import sys, zipfile
jar, lib, pom, version = sys.argv[1:]
with zipfile.ZipFile(jar, "a", zipfile.ZIP_DEFLATED) as z:
    z.write(lib, "linux-x86-64/libgeopriv_ffi.so")
    z.write(pom, "META-INF/maven/dev.geopriv/geopriv/pom.xml")
    z.writestr("META-INF/maven/dev.geopriv/geopriv/pom.properties",
               f"groupId=dev.geopriv\nartifactId=geopriv\nversion={version}\n")
PY
  mv "$OUT/cache/classes.jar" "$OUT/cache/$hash.jar"
fi
cp "$OUT/cache/$hash.jar" "$JAR"
echo "jar: $JAR ($(du -k "$JAR" | cut -f1) KiB), pom: $OUT/geopriv-$VERSION.pom"
