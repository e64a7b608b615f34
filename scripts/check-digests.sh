#!/usr/bin/env bash
# The no-behaviour-change guard: runs seeded pipelines and compares the
# sha256 of every output against the digests committed in scripts/digests/.
#
#   scripts/check-digests.sh            CI size (2,000 input lines; a few seconds
#                                       plus the tiny experiments), debug binary
#   scripts/check-digests.sh --full     1,000,000 input lines per run, release
#                                       binary (run by hand before and after a
#                                       refactor; a few minutes)
#   scripts/check-digests.sh --update   rewrite the committed digests of the
#                                       chosen size instead of comparing
#   --keep DIR                          keep the outputs in DIR (to diff them)
#
# What is covered, all seeded:
#   * `geopriv privatize` for every mechanism x query family, JSON and binary
#     output (input with a few malformed lines, so the error path is covered),
#     with the exit status and the stderr text;
#   * `geopriv aggregate` on each of those outputs (JSON and binary input);
#   * `geopriv sensitivity` for every family and both growth functions;
#   * the experiment tables (threshold, two-way, the per-query kde and the
#     kde at equal per-device ε) at small seeded sizes, without the
#     wall-time line.
#
# When a change is MEANT to change outputs (e.g. a new sampler), run the
# script with --update (and --full --update), check that only the expected
# lines of scripts/digests/*.sha256 changed (`git diff scripts/digests`), and
# commit the new digests together with the change, saying why in the message.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=ci
update=0
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --full) mode=full ;;
    --update) update=1 ;;
    --keep) keep="$2"; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

if [ "$mode" = full ]; then
  lines=1000000
  cargo build --release -q -p geopriv-cli
  bin=target/release/geopriv
else
  lines=2000
  cargo build -q --profile test -p geopriv-cli  # the build `cargo test --workspace` made (target/debug)
  bin=target/debug/geopriv
fi
digests="scripts/digests/$mode.sha256"

if [ -n "$keep" ]; then
  work="$keep"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
manifest="$work/manifest.sha256"
: >"$manifest"

# Record the digest of file $2 under the name $1.
record() {
  printf '%s  %s\n' "$(sha256sum <"$2" | cut -d' ' -f1)" "$1" >>"$manifest"
}

# Deterministic inputs: $lines points with malformed lines sprinkled in.
awk -v n="$lines" 'BEGIN {
  for (i = 1; i <= n; i++) {
    if (i % 997 == 0) { print "not-a-number"; continue }
    if (i % 1999 == 0) { print ""; continue }
    printf "%.2f\n", (i * 7919) % 400000 + i / 1000.0
  }
}' >"$work/in1.txt"
awk -v n="$lines" 'BEGIN {
  for (i = 1; i <= n; i++) {
    if (i % 997 == 0) { print "1,2,3"; continue }
    if (i % 1999 == 0) { print "nan, 4"; continue }
    printf "%.2f, %.2f\n", (i * 7919) % 400000 + i / 1000.0, (i * 104729) % 300000 - 50000
  }
}' >"$work/in2.txt"

families=(threshold interval two-way kde)
family_args() {
  case "$1" in
    threshold) echo "--threshold 100000 --width 20000" ;;
    interval) echo "--lower 50000 --upper 150000 --width 20000" ;;
    two-way) echo "--threshold 100000,50000 --width 20000" ;;
    kde) echo "--center 120000,60000 --bandwidth 30000" ;;
  esac
}
family_input() {
  case "$1" in
    threshold | interval) echo "$work/in1.txt" ;;
    *) echo "$work/in2.txt" ;;
  esac
}
mechanisms=(polyplace student-t cauchy laplace global-laplace a-priori ldp)
mechanism_args() {
  case "$1" in
    laplace) echo "--epsilon 1e-4 --delta 1e-6" ;;
    ldp) echo "--epsilon 0.5" ;;
    *) echo "--epsilon 1e-4" ;;
  esac
}

# Run "$@" with stdout to $out and stderr to $out.err, recording all three.
run_recorded() {
  local name="$1" input="$2" out="$3"
  shift 3
  local status=0
  "$@" <"$input" >"$out" 2>"$out.err" || status=$?
  record "$name.stdout" "$out"
  record "$name.stderr" "$out.err"
  echo "$status" >"$out.status"
  record "$name.status" "$out.status"
}

for fam in "${families[@]}"; do
  input="$(family_input "$fam")"
  # shellcheck disable=SC2046
  for growth in exp linear; do
    run_recorded "sensitivity.$fam.$growth" "$input" "$work/sens.$fam.$growth" \
      "$bin" sensitivity "$fam" $(family_args "$fam") --growth "$growth" --gamma 1e-5
  done
  for mech in "${mechanisms[@]}"; do
    for fmt in json binary; do
      out="$work/privatize.$fam.$mech.$fmt"
      # shellcheck disable=SC2046
      run_recorded "privatize.$fam.$mech.$fmt" "$input" "$out" \
        "$bin" privatize "$fam" $(family_args "$fam") --mechanism "$mech" \
        $(mechanism_args "$mech") --seed 7 --unmetered --format "$fmt"
      run_recorded "aggregate.$fam.$mech.$fmt" "$out" "$work/aggregate.$fam.$mech.$fmt" \
        "$bin" aggregate --format "$fmt" --allow-ldp 1 --accept-seeded
    done
  done
done

# The experiment tables (the wall-time line dropped).
# experiment NAME LABEL ARGS...: `geopriv experiment NAME ARGS`, recorded
# as experiment.LABEL.
experiment() {
  local name="$1" label="$2"
  shift 2
  "$bin" experiment "$name" --no-plots --threads 2 --seed 11 --force --out "$work/exp.$label" "$@" >/dev/null 2>&1
  grep -v 'computed in' "$work/exp.$label/results.md" >"$work/exp.$label.md"
  record "experiment.$label" "$work/exp.$label.md"
}
experiment threshold threshold --n 500,1000 --epsilon 1/800,1/12000 --reps 2 --thresholds 100k,1M
experiment two-way two-way --n 300,600 --epsilon 1/12000,1/3000 --grid 3 --reps 2
# The paper's per-query KDE, and every map mechanism at equal per-device ε
# (airports and the synthetic city; few server bins to stay quick in debug).
experiment kde kde --per-query-paper --n 300 --epsilon 1e-5,1e-4 --grid 6
experiment kde kde-equal --n 300 --eps-h 1,10 --grid 6 --map-bins 64

if [ "$update" = 1 ]; then
  mkdir -p scripts/digests
  cp "$manifest" "$digests"
  echo "wrote $digests ($(wc -l <"$digests") digests)"
  exit 0
fi
if [ ! -f "$digests" ]; then
  echo "no committed digests at $digests: run with --update first" >&2
  exit 1
fi
if diff -u "$digests" "$manifest"; then
  echo "digests ($mode): all $(wc -l <"$digests") outputs identical"
else
  echo "digests ($mode): outputs changed (see the diff above; --keep DIR keeps them)." >&2
  echo "If the change is intended, regenerate with --update and commit the digests." >&2
  exit 1
fi
