#!/usr/bin/env bash
# Writes small GGUF files into seeds/ with gguf-py (tests/python/gguf_oracle.py seeds): each
# readable tensor type, metadata of every value type, a llama-shaped header with tokenizer
# arrays, a 64-byte alignment and a version 2 file. Needs the oracle venv (tool/ci/setup.sh),
# or env RBUILD_PYTHON. Also makes corpus/gguf_reader, where the fuzzer keeps what it finds.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/gguf_reader
python=${RBUILD_PYTHON:-../../../.venv/bin/python}
"$python" ../tests/python/gguf_oracle.py seeds seeds
echo "seeded $(ls seeds | wc -l) inputs in seeds/"
