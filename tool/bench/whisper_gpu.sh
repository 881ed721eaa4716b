#!/usr/bin/env bash
# Whisper base shapes (random, well-conditioned weights): encoder and 64-token decode on rbuild's
# GPU runtime (the GPU delegate over wgpu: Vulkan on Linux, Metal on macOS) and on rbuild's CPU
# runtime (all cores), same weights, same run; prints milliseconds and CPU/GPU ratios. Not part
# of CI. On a machine without a GPU wgpu finds Mesa's lavapipe (a CPU Vulkan driver): the figures
# then measure lavapipe, not a GPU, and the adapter line says so. For an NVIDIA GPU, wgpu needs the
# Vulkan loader (libvulkan1) and NVIDIA's ICD (the driver's nvidia_icd.json).
# Usage: bash tool/bench/whisper_gpu.sh [--size tiny|base] [--tokens 64] [--repeat 3] [--weights f32|f16]
#                                       [--threads N] [--device auto|gpu|NAME]
set -euo pipefail
cd "$(dirname "$0")/../.."
size=base
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    *) pass+=("$1"); shift ;;
  esac
done
bash tool/ci/setup.sh >/dev/null
dir="target/whisper_gpu_bench/$size"
if [ ! -f "$dir/model.safetensors" ]; then
  mkdir -p "$dir"
  .venv/bin/python tool/bench/whisper_random_checkpoint.py "$dir" --size "$size" --seed 0
fi
cargo build --release -q -p rbuild-gpu --example whisper_gpu_bench
exec "${CARGO_TARGET_DIR:-target}/release/examples/whisper_gpu_bench" "$dir" "${pass[@]}"
