#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU, in one go (a GPU machine is lent only at times and
# briefly): the CUDA runtime's conformance tests (each kernel against its CPU twin over a shape
# grid, a transformer block, if_zero), the driver probe, and voxtral-cuda end to end (the runner
# on CUDA vs the CPU reference, `rbuild verify`). Each prints what it ran; without a GPU they
# pass with a notice, so read the output for "notice: no CUDA device".
# Needs: cargo, the NVIDIA driver, NVRTC (`pip install nvidia-cuda-nvrtc-cu12`, or RBUILD_NVRTC),
# ../shared/testdata. Usage: bash tool/ci/gpu-check.sh [--skip-recipe]
set -euo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "notice: nvidia-smi failed"
export RBUILD_PYTHON="${RBUILD_PYTHON:-$PWD/.venv/bin/python}"
cargo test --release -p rbuild-gpu-cuda -- --nocapture
if [ "${1:-}" != --skip-recipe ]; then
  cargo test --release -p rbuild --test suite voxtral_cuda_recipe -- --nocapture
fi
