# Shared by the packaging scripts (sourced after common.sh): the Python
# wheel, the JVM jar and the Spark test. Every tool comes from a registry
# and is cached under $CACHE_DIR (default ~/.cache/geopriv):
#   maturin   PyPI, in its own venv  $CACHE_DIR/venv-maturin-$MATURIN_VERSION
#   pyspark   PyPI, in its own venv  $CACHE_DIR/venv-pyspark-$PYSPARK_VERSION
#   pip's download cache             $CACHE_DIR/pip
# shellcheck shell=bash

MATURIN_VERSION=1.16.0
PYSPARK_VERSION=4.3.0
export PIP_CACHE_DIR="$CACHE_DIR/pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
WHEEL_DIR="$TARGET_DIR/wheels"

# python3 with venv and pip (Debian splits them into python3-venv/python3-pip).
ensure_python() {
  command -v python3 >/dev/null || apt_install python3
  local probe
  probe="$(mktemp -d)"
  if ! python3 -m venv "$probe/v" >/dev/null 2>&1 || [ ! -x "$probe/v/bin/pip" ]; then
    echo "installing python3-venv and python3-pip (Debian)"
    apt_install python3-venv python3-pip
  fi
  rm -rf "$probe"
}

# make_venv DIR PACKAGE...: a virtual environment with PACKAGE... from PyPI,
# kept (with a stamp) so the second run installs nothing.
make_venv() {
  local dir="$1"
  shift
  if [ ! -f "$dir/.geopriv-ready" ]; then
    ensure_python
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q "$@"
    touch "$dir/.geopriv-ready"
  fi
}

# Java 17 or newer on PATH (Spark 4 and the JVM tests need it).
ensure_java17() {
  local major=0
  if command -v java >/dev/null; then
    major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
  fi
  case "$major" in
    "" | 1.* | [0-9] | 1[0-6])
      echo "installing Java 17 (Debian openjdk-17-jdk-headless)"
      apt_install openjdk-17-jdk-headless ;;
  esac
}

# build_wheel: the release wheel of geopriv-ffi built by maturin; sets WHEEL.
#
# maturin generates the Python module itself by running the crate's
# `uniffi-bindgen` binary. It looks the binary up in the workspace's *root*
# package first, and this workspace's root is the core crate `geopriv`, so
# it runs `cargo run --bin uniffi-bindgen --features cli` where cargo
# cannot find it. A `cargo` shim on PATH adds `-p geopriv-ffi` to exactly
# that command (everything else goes to the real cargo unchanged).
build_wheel() {
  make_venv "$CACHE_DIR/venv-maturin-$MATURIN_VERSION" "maturin==$MATURIN_VERSION"
  local log shim real_cargo
  real_cargo="$(command -v cargo)"
  shim="$(mktemp -d)"
  cat >"$shim/cargo" <<SHIM
#!/bin/sh
if [ "\$1 \$2 \$3" = "run --bin uniffi-bindgen" ]; then
  shift 3
  exec "$real_cargo" run --quiet -p geopriv-ffi --bin uniffi-bindgen "\$@"
fi
exec "$real_cargo" "\$@"
SHIM
  chmod +x "$shim/cargo"
  log="$(mktemp)"
  rm -rf "$WHEEL_DIR"
  if ! (cd "$REPO/bindings" && PATH="$shim:$PATH" "$CACHE_DIR/venv-maturin-$MATURIN_VERSION/bin/maturin" build \
      --release --out "$WHEEL_DIR") >"$log" 2>&1; then
    rm -rf "$shim"
    cat "$log" >&2
    rm -f "$log"
    echo "error: maturin build failed" >&2
    exit 1
  fi
  rm -f "$log"
  rm -rf "$shim"
  WHEEL="$(ls "$WHEEL_DIR"/geopriv-*.whl)"
  [ -f "$WHEEL" ] || { echo "error: no wheel in $WHEEL_DIR" >&2; exit 1; }
}
