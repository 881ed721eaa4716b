#!/usr/bin/env bash
# MobileNetV2 fp32 benchmark: rbuild vs ExecuTorch 1.3.1 in the same run (see mobilenet_v2.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh >/dev/null
cargo build --release -q -p rbuild
exec taskset -c 0 .venv/bin/python tool/bench/mobilenet_v2.py target/release/rbuild ../shared/testdata "$@"
