#!/usr/bin/env bash
# Builds and tests what users install (issue 14), as they get it:
#   1. the Python wheel `geopriv` (maturin), in a fresh venv with only the
#      wheel: packaging checks, the README quick start, the binding suite
#      (bindings/scripts/test-wheel.sh);
#   2. the JVM jar + POM, and a Kotlin program compiled against the jar
#      alone (bindings/scripts/test-jar.sh);
#   3. geopriv.spark on PySpark 4: local mode and a standalone cluster on
#      127.0.0.1, 10^6 reports, bit for bit against `geopriv aggregate`
#      (bindings/scripts/test-spark.sh);
#   4. the README's Swift quick start and the hand-written Swift extensions
#      (bindings/extensions/swift) against the generated Swift, by name.
# Installs what it needs (maturin and pyspark from PyPI, Java 17, JNA and
# python3-venv from Debian, kotlinc from npm), cached in ~/.cache/geopriv.
# Called by scripts/test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source bindings/scripts/common.sh
source bindings/scripts/packages.sh

stamp() { echo "-- packages: $1 ($(( SECONDS - start )) s so far)"; }
start=$SECONDS

stamp "Swift quick start matches the generated bindings"
check_readme_example bindings/tests/swift/QuickStart.swift README.md
check_readme_example "bindings/tests/swift/QuickStart.swift#map" README.md
check_readme_example "bindings/tests/swift/QuickStart.swift#region" README.md
check_readme_example "bindings/tests/swift/QuickStart.swift#outbox" README.md
python3 - bindings/tests/swift/QuickStart.swift bindings/swift/geopriv_ffi.swift <<'PY'
import re, sys
quick, generated = (open(p).read() for p in sys.argv[1:])
calls = re.findall(r"\b([A-Z]\w*)?\.?(\w+)\((\w+):", quick.split("import Foundation", 1)[1])
# Type(label: ...) is a memberwise/designated initializer: look for init(label: in the generated type.
inits = re.findall(r"\b([A-Z]\w*)\((\w+):", quick.split("import Foundation", 1)[1])
calls = [c for c in calls if (c[0] + c[1], c[2]) not in inits]
missing = [f"{name}({label}:" for _, name, label in calls
           if not re.search(rf"func `?{name}`?\({label}:", generated) and not re.search(rf"\b{name}\b", "deviceUpload openLedger mapUpload regionUpload uploadOutbox sleep")]
missing += [f"{t}({label}:" for t, label in inits
            if not (m := re.search(rf"(class|struct) {t}\b", generated))
            or not re.search(rf"init\((?:\s|/\*\*.*?\*/)*{label}:", generated[m.end():m.end() + 4000], re.S)]
calls += inits
types = set(re.findall(r"\b(GeoQuery|GeoMechanism|PrivacyLedger|BudgetPolicy|BudgetUnit|ReportPolicy|Aggregator|MapGrid|MapRelease)\b", quick))
missing += [t for t in types if not re.search(rf"(class|struct|enum) {t}\b", generated)]
if missing or not calls:
    sys.exit(f"error: README's Swift quick start uses {missing} not in bindings/swift/geopriv_ffi.swift")
print(f"swift: {len(calls)} calls and {len(types)} types match the generated bindings")
PY
# The hand-written Swift extensions (GeoprivError.code) by name: extended
# types, enum cases (exhaustive switch), members (no Swift toolchain here).
python3 bindings/scripts/check-swift-extensions.py bindings/swift/geopriv_ffi.swift bindings/extensions/swift/*.swift

stamp "Python wheel (maturin)"
build_wheel
export WHEEL
bindings/scripts/test-wheel.sh

stamp "JVM jar"
bindings/scripts/test-jar.sh

stamp "Spark"
bindings/scripts/test-spark.sh
stamp "done"
