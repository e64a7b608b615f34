#!/usr/bin/env bash
# Builds libgeopriv_ffi.so for Android, one per ABI, in the jniLibs layout
# an Android Gradle module expects:
#   <out>/arm64-v8a/libgeopriv_ffi.so
#   <out>/armeabi-v7a/libgeopriv_ffi.so
#   <out>/x86_64/libgeopriv_ffi.so
# Default <out>: target/android/jniLibs (or pass a directory, e.g.
# app/src/main/jniLibs). Copy bindings/kotlin/ into the app's Kotlin sources
# and depend on "net.java.dev.jna:jna:5.13.0@aar".
#
# Needs: the Android NDK (found by cargo-ndk in the SDK's default location,
# or set ANDROID_NDK_HOME) and cargo-ndk (`cargo install cargo-ndk`).
# Not runnable in the geopriv CI/dev machines (no NDK there).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$REPO/target/android/jniLibs}"
MIN_SDK="${ANDROID_MIN_SDK:-21}"

command -v cargo-ndk >/dev/null || { echo "error: cargo-ndk not found: cargo install cargo-ndk" >&2; exit 1; }
rustup target add aarch64-linux-android armv7-linux-androideabi x86_64-linux-android

cd "$REPO"
cargo ndk --platform "$MIN_SDK" -t arm64-v8a -t armeabi-v7a -t x86_64 -o "$OUT" \
  build --release -p geopriv-ffi --lib
echo "built arm64-v8a, armeabi-v7a and x86_64 libgeopriv_ffi.so in $OUT"
