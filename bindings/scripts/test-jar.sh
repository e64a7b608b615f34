#!/usr/bin/env bash
# Tests the JVM artifact as a consumer gets it (after build-jar.sh): checks
# the POM (parses, declares JNA and kotlin-stdlib, is the one inside the
# jar), compiles bindings/tests/kotlin/QuickStart.kt against the jar alone
# (plus JNA), and runs it with only the jar, JNA and kotlin-stdlib on the
# class path, from an empty directory and without -Djna.library.path, so
# JNA must load linux-x86-64/libgeopriv_ffi.so from the jar. The program
# runs the device and server flow of the README's Kotlin quick start (also
# checked to be the copy in QuickStart.kt) and prints "jar: N passed, M failed".
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"

check_readme_example bindings/tests/kotlin/QuickStart.kt README.md
check_readme_example "bindings/tests/kotlin/QuickStart.kt#map" README.md
check_readme_example "bindings/tests/kotlin/QuickStart.kt#region" README.md
check_readme_example "bindings/tests/kotlin/QuickStart.kt#outbox" README.md
ensure_kotlin
"$(dirname "$0")/build-jar.sh" >/dev/null
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/bindings/Cargo.toml" | head -n1)"
JAR="$TARGET_DIR/jvm/geopriv-$VERSION.jar"
POM="$TARGET_DIR/jvm/geopriv-$VERSION.pom"

python3 - "$JAR" "$POM" "$VERSION" <<'PY'
import sys, zipfile, xml.etree.ElementTree as ET
jar, pom, version = sys.argv[1:]
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
root = ET.parse(pom).getroot()
coords = [root.findtext(f"m:{k}", namespaces=ns) for k in ("groupId", "artifactId", "version")]
deps = {(d.findtext("m:groupId", namespaces=ns), d.findtext("m:artifactId", namespaces=ns)): d.findtext("m:version", namespaces=ns)
        for d in root.iterfind("m:dependencies/m:dependency", ns)}
assert coords == ["dev.geopriv", "geopriv", version], coords
assert set(deps) == {("net.java.dev.jna", "jna"), ("org.jetbrains.kotlin", "kotlin-stdlib")} and all(deps.values()), deps
z = zipfile.ZipFile(jar)
names = set(z.namelist())
assert "linux-x86-64/libgeopriv_ffi.so" in names and "geopriv/GeoQuery.class" in names, sorted(names)[:20]
assert z.read("META-INF/maven/dev.geopriv/geopriv/pom.xml") == open(pom, "rb").read(), "embedded POM differs"
assert not any(n.startswith("kotlin/") or n.startswith("com/sun/jna/") for n in names), "dependencies bundled"
print(f"pom: dev.geopriv:geopriv:{version}, depends on " + ", ".join(f"{g}:{a}:{v}" for (g, a), v in sorted(deps.items())))
PY

OUT="$TARGET_DIR/jvm/quickstart"
mkdir -p "$OUT"
hash="$(sha256sum "$JAR" "$REPO/bindings/tests/kotlin/QuickStart.kt" | sha256sum | cut -c1-16)"
APP="$OUT/quickstart-$hash.jar"
if [ ! -f "$APP" ]; then
  rm -f "$OUT"/quickstart-*.jar
  "$KOTLINC" -nowarn -cp "$JAR:$JNA_JAR" -d "$APP.tmp.jar" "$REPO/bindings/tests/kotlin/QuickStart.kt" 2>&1 \
    | grep -v '^info: \|^warning: ' >&2 || true
  [ -f "$APP.tmp.jar" ] || { echo "error: kotlinc failed on QuickStart.kt" >&2; exit 1; }
  mv "$APP.tmp.jar" "$APP"
fi
EMPTY="$(mktemp -d)"
trap 'rm -rf "$EMPTY"' EXIT
cd "$EMPTY"
java -Dgeopriv.expectedVersion="$VERSION" -cp "$APP:$JAR:$JNA_JAR:$STDLIB" QuickStartKt
