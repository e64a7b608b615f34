#!/usr/bin/env bash
# Builds GeoprivFFI.xcframework (static libraries + C header + modulemap)
# for iOS devices and the simulator (Apple silicon and Intel):
#   <out>/GeoprivFFI.xcframework     default <out>: target/ios
# Add it to the Xcode project together with bindings/swift/geopriv_ffi.swift,
# which imports the C module `geopriv_ffiFFI` the xcframework provides.
#
# Needs: macOS with Xcode (xcodebuild, lipo). Not runnable in the geopriv
# CI/dev machines (Linux, no Xcode).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$REPO/target/ios}"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
LIB=libgeopriv_ffi.a

[ "$(uname -s)" = Darwin ] || { echo "error: build-ios.sh needs macOS with Xcode" >&2; exit 1; }
rustup target add aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios

cd "$REPO"
for target in aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios; do
  cargo build --release -p geopriv-ffi --lib --target "$target"
done

# One fat simulator library (arm64 + x86_64); the device slice stays arm64.
rm -rf "$OUT" && mkdir -p "$OUT/sim" "$OUT/headers"
lipo -create \
  "$TARGET_DIR/aarch64-apple-ios-sim/release/$LIB" \
  "$TARGET_DIR/x86_64-apple-ios/release/$LIB" \
  -output "$OUT/sim/$LIB"

# The committed, generated header and modulemap (kept fresh by
# generate.sh --check); an xcframework wants the map named module.modulemap.
cp "$REPO/bindings/swift/geopriv_ffiFFI.h" "$OUT/headers/"
cp "$REPO/bindings/swift/geopriv_ffiFFI.modulemap" "$OUT/headers/module.modulemap"

xcodebuild -create-xcframework \
  -library "$TARGET_DIR/aarch64-apple-ios/release/$LIB" -headers "$OUT/headers" \
  -library "$OUT/sim/$LIB" -headers "$OUT/headers" \
  -output "$OUT/GeoprivFFI.xcframework"
echo "built $OUT/GeoprivFFI.xcframework"
