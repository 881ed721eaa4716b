#!/usr/bin/env bash
# MobileNetV2 / V3-small, fp32 and int8, 1 and 2 threads: rbuild vs ExecuTorch 1.3.1's XNNPACK
# in the same run (see mobilenet_v2.py). Extra arguments go to mobilenet_v2.py (e.g. --repeat 50).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh >/dev/null
cargo build --release -q -p rbuild
cargo build --release -q -p rbuild-kernels --example nhwc_f32_bench
# This machine's f32 GEMM peak (one core), for the "% peak" column.
peak=$(taskset -c 0 target/release/examples/nhwc_f32_bench --peak-only | sed -n 's/^peak_gflops \([0-9.]*\).*/\1/p')
echo "f32 peak (one core, FMA loop): ${peak:-unknown} GFLOP/s"
# One thread: ExecuTorch's pool must also see one CPU (tool/bench/one_cpu.sh), else it puts two
# threads on the one core taskset allows and is slower than it can be.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  one=tool/bench/one_cpu.sh
else
  one=""
  echo "warning: not root: ExecuTorch's thread pool will run 2 threads on the 1 core (its 1-thread figure is pessimistic)" >&2
fi
$one taskset -c 0 .venv/bin/python tool/bench/mobilenet_v2.py target/release/rbuild ../shared/testdata --threads 1 --peak-gflops "${peak:-0}" "$@"
if [ "$(nproc)" -ge 2 ]; then
  taskset -c 0,1 .venv/bin/python tool/bench/mobilenet_v2.py target/release/rbuild ../shared/testdata --threads 2 --peak-gflops "$(awk "BEGIN{print ${peak:-0} * 2}")" "$@"
fi
