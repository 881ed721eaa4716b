#!/usr/bin/env bash
# Whisper (tiny and base shapes, random weights) encoder / decoder / real-time factor: rbuild vs
# whisper.cpp (pywhispercpp 1.5.1, whisper.cpp 1.8.5 built from source for this CPU) on the same
# weights, in the same run, 1 and 2 threads pinned with taskset; see whisper_bench.py. Not part of
# CI. The first run compiles whisper.cpp through pip (several minutes on 2 cores); model files
# (~1.2 GB: HF folders and ggml f32/q8_0) go to target/whisper_bench, the 30 s WAV to a temp dir.
# Voxtral's audio encoder (Whisper large-v3 shape: 1280 x 32 layers, 128 mels; decoder trimmed):
#   bash tool/bench/whisper.sh --sizes large-v3 --max-new-tokens 4 --repeat 3   (~4.5 GB of model files)
# Usage: bash tool/bench/whisper.sh [--quick] [--whisper-cpp-only] [--sizes tiny,base,large-v3] [--threads 1,2]
#                                   [--quants fp32,int8] [--max-new-tokens 64] [--repeat N]
#                                   [--runner PATH] [--json FILE] [--skip-check]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh --whisper-bench >/dev/null
cpp_only=0
for arg in "$@"; do [ "$arg" = --whisper-cpp-only ] && cpp_only=1; done
if [ "$cpp_only" = 0 ]; then
  cargo build --release -q -p rbuild
  # The runner is built when the workspace has a binary target named whisper_runner (the `asr`
  # template); without it the rbuild rows are skipped with a notice.
  runner_pkg=$(cargo metadata --no-deps --format-version 1 | .venv/bin/python -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if any(t["name"] in ("whisper_runner", "whisper-runner") and "bin" in t["kind"] for t in p["targets"]):
        print(p["name"]); break')
  if [ -n "$runner_pkg" ]; then
    cargo build --release -q -p "$runner_pkg"
  fi
fi
exec .venv/bin/python tool/bench/whisper_bench.py run --rbuild target/release/rbuild "$@"
