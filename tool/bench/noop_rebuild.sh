#!/usr/bin/env bash
# No-op rebuild time: builds each case once (the first build of a recipe compiles its runner in
# release: minutes), then runs it RUNS more times with nothing changed and prints the median,
# min and max wall time of those runs.
#
#   bash tool/bench/noop_rebuild.sh [RUNS]          # default 10 runs per case
#
# RBUILD_BIN: the rbuild binary (default: target/debug/rbuild, built first; the dev profile is
# optimized). RBUILD_OUT: the out folder (default: out/ in the project, so earlier builds count).
# NOOP_CASES: the cases, one per line (default below).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-10}
if [ -z "${RBUILD_BIN:-}" ]; then
  cargo build -q -p rbuild
  RBUILD_BIN=$PWD/target/debug/rbuild
fi
export RBUILD_OUT=${RBUILD_OUT:-$PWD/out}
cases=${NOOP_CASES:-"mobilenet-cpu platform=host
mobilenet-cpu
llama-cpu
whisper-cpu
mobilenet-cortex-m
mobilenet-ethosu"}

printf '%-36s %10s %10s %10s\n' "rbuild …" "median ms" "min ms" "max ms"
while IFS= read -r case; do
  [ -n "$case" ] || continue
  read -r -a words <<< "$case"
  if ! "$RBUILD_BIN" "${words[@]}" > /dev/null 2>&1; then
    echo "rbuild $case: the first build failed; run it by hand to see why" >&2
    exit 1
  fi
  times=()
  for ((i = 0; i < runs; i++)); do
    # $EPOCHREALTIME (bash 5) reads the clock without starting a process.
    start=$EPOCHREALTIME
    "$RBUILD_BIN" "${words[@]}" > /dev/null 2>&1
    end=$EPOCHREALTIME
    times+=("$(awk -v a="${start/,/.}" -v b="${end/,/.}" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v name="$case" '
    { t[NR] = $1 }
    END {
      median = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
      printf "%-36s %10.1f %10.1f %10.1f\n", name, median, t[1], t[NR]
    }'
done <<< "$cases"
