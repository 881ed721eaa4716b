#!/usr/bin/env bash
# Installs what rbuild's tests need on a fresh Debian machine: cross tools (apt), Rust targets, and a Python 3.12
# venv (.venv) with ExecuTorch 1.3.1's runtime (executorch-numpy-runtime) as the oracle.
# Idempotent: a second run only checks.
#
# `setup.sh --llama-bench` also installs what tool/bench/llama.sh needs (not CI): llama.cpp through
# the llama-cpp-python PyPI package, compiled from source for this CPU (15+ minutes on 2 cores),
# and the gguf writer. Pinned so benchmark figures stay comparable between runs.
#
# `setup.sh --whisper-bench` installs what tool/bench/whisper.sh needs (not CI): whisper.cpp 1.8.x
# through the pywhispercpp 1.5.1 PyPI sdist, compiled from source for this CPU (-DGGML_NATIVE=ON;
# several minutes on 2 cores; cmake and ninja come as wheels through pip's build isolation, g++
# from apt when missing), and the openai-whisper sdist's tokenizer/mel assets (multilingual.tiktoken,
# mel_filters.npz), extracted into .venv/share/whisper-assets (never committed).
set -euo pipefail
LLAMA_BENCH=0
WHISPER_BENCH=0
for arg in "$@"; do
  case "$arg" in
    --llama-bench) LLAMA_BENCH=1 ;;
    --whisper-bench) WHISPER_BENCH=1 ;;
    *) echo "error: setup.sh: unknown argument '$arg' (known: --llama-bench, --whisper-bench)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."

# Cross toolchains: the aarch64 linker and QEMU (linux-arm64 builds run under qemu-aarch64,
# Corstone-300 firmware under qemu-system-arm), the Arm bare-metal GCC (test ELFs, firmware
# tools); Mesa's CPU Vulkan driver for the GPU runtime's tests. apt-get runs as root, through sudo when not root, or not at all (then say what to do).
missing_pkgs=()
for pair in aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64:qemu-user \
            qemu-system-arm:qemu-system-arm arm-none-eabi-gcc:gcc-arm-none-eabi; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing_pkgs+=("${pair#*:}")
done
# The aarch64 C runtime and libc (crti.o, -lc) for linking: only a recommendation of
# gcc-aarch64-linux-gnu, which --no-install-recommends drops.
[ -f /usr/aarch64-linux-gnu/lib/crti.o ] || missing_pkgs+=(libc6-dev-arm64-cross)
# A Vulkan device without a GPU: Mesa's lavapipe (a CPU Vulkan driver) and the Vulkan loader
# (a hard dependency, so --no-install-recommends keeps it), on which the GPU delegate's wgpu
# runtime and the whisper-metal host build run in tests.
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -f /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || missing_pkgs+=(mesa-vulkan-drivers)
# whisper.cpp's build (--whisper-bench) needs a C++ compiler; cmake/ninja come from PyPI wheels.
if [ "$WHISPER_BENCH" = 1 ]; then
  command -v g++ >/dev/null 2>&1 || missing_pkgs+=(g++)
fi
if [ "${#missing_pkgs[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=(); elif command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else SUDO=(none); fi
  if [ "${SUDO[*]}" = none ]; then
    echo "error: setup.sh: install ${missing_pkgs[*]} (apt-get install -y ${missing_pkgs[*]}) as root; no sudo here" >&2
    exit 1
  fi
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing_pkgs[@]}"
fi

# Rust targets: Cortex-M55 (no_std check, firmware), aarch64 Linux (built and run under QEMU),
# and the Apple/Android targets, whose runtime + kernels CI `cargo check`s (their linkers need
# Xcode or the NDK, which only a Mac or an NDK install has).
installed_targets=$(rustup target list --installed)
for t in thumbv8m.main-none-eabihf aarch64-unknown-linux-gnu aarch64-apple-darwin aarch64-apple-ios aarch64-linux-android; do
  if ! grep -qx "$t" <<<"$installed_targets"; then
    rustup target add "$t"
  fi
done

# Python 3.12 for executorch-numpy-runtime (needs >= 3.12).
find_python312() {
  local c candidates=()
  if command -v pyenv >/dev/null 2>&1; then
    for c in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do candidates+=("$c"); done
  fi
  candidates+=(python3.12 python3.13 python3)
  for c in "${candidates[@]}"; do
    # pyenv shims exist for versions that are not selected: run each candidate to be sure.
    if "$c" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
      command -v "$c" || echo "$c"
      return
    fi
  done
  return 1
}
# mistral-common: the Tekken tokenizer oracle (templates/support/tests/tekken.rs) and its
# tekken.json files.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import executorch_numpy_runtime, safetensors, numpy, mistral_common' 2>/dev/null; then
  PY=$(find_python312) || { echo "error: Python 3.12 not found (install python3.12 or pyenv 3.12)" >&2; exit 1; }
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check executorch-numpy-runtime numpy safetensors mistral-common
fi
# gguf-py (llama.cpp's GGUF package): the oracle for tool/gguf's reader (tests/gguf_py.rs writes
# GGUF files with it and compares its dequantization bit for bit). Pinned, and the same version
# --llama-bench installs.
if ! .venv/bin/python -c 'import importlib.metadata as m; assert m.version("gguf") == "0.19.0"' 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check gguf==0.19.0
fi
# Arm's Vela compiler for the Ethos-U lowering (a binary wheel), pinned: its raw output layout
# is what tool/ethosu parses.
if [ ! -x .venv/bin/vela ] || [ "$(.venv/bin/vela --version 2>/dev/null)" != "5.2.0" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check ethos-u-vela==5.2.0
fi
# NVRTC and ptxas (NVIDIA's wheels; no GPU or driver needed): the CUDA runtime's kernels are
# compiled for sm_80/sm_90 and assembled in CI (runtime/cuda/tests/nvrtc.rs). Pinned to 12.8.
if ! .venv/bin/python -c 'import importlib.metadata as m; assert m.version("nvidia-cuda-nvrtc-cu12") == m.version("nvidia-cuda-nvcc-cu12") == "12.8.93"' 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check nvidia-cuda-nvrtc-cu12==12.8.93 nvidia-cuda-nvcc-cu12==12.8.93
fi
if [ "$LLAMA_BENCH" = 1 ] && ! .venv/bin/python -c 'import llama_cpp, gguf' 2>/dev/null; then
  echo "setup: building llama-cpp-python (llama.cpp from source, -DGGML_NATIVE=ON); this takes a while" >&2
  CMAKE_ARGS="-DGGML_NATIVE=ON" .venv/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
    llama-cpp-python==0.3.36 gguf==0.19.0
fi
WHISPER_ASSETS=.venv/share/whisper-assets
if [ "$WHISPER_BENCH" = 1 ]; then
  if ! .venv/bin/python -c 'import importlib.metadata as m; assert m.version("pywhispercpp") == "1.5.1"; import _pywhispercpp' 2>/dev/null; then
    echo "setup: building pywhispercpp 1.5.1 (whisper.cpp from source, -DGGML_NATIVE=ON); this takes a while" >&2
    .venv/bin/pip uninstall --quiet --disable-pip-version-check -y pywhispercpp 2>/dev/null || true
    # Only pywhispercpp from its sdist: --no-binary :all: would also build its build
    # requirements (cmake itself) from source. Its setup.py sets the $ORIGIN rpath only for
    # editable installs (wheels get theirs from auditwheel), so without these two the
    # libraries would look for each other in pip's deleted build folder.
    CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_INSTALL_RPATH=\$ORIGIN -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON" \
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      .venv/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
      --no-binary pywhispercpp pywhispercpp==1.5.1
  fi
  if [ ! -f "$WHISPER_ASSETS/multilingual.tiktoken" ] || [ ! -f "$WHISPER_ASSETS/mel_filters.npz" ] || [ ! -f "$WHISPER_ASSETS/gpt2.tiktoken" ]; then
    dl=$(mktemp -d)
    # The sdist is only unpacked for its assets; its metadata step needs no build.
    .venv/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary openai-whisper \
      openai-whisper==20250625 -d "$dl"
    mkdir -p "$WHISPER_ASSETS"
    tar -xzf "$dl"/openai*whisper-20250625.tar.gz -C "$dl"
    cp "$dl"/openai*whisper-20250625/whisper/assets/multilingual.tiktoken \
       "$dl"/openai*whisper-20250625/whisper/assets/mel_filters.npz \
       "$dl"/openai*whisper-20250625/whisper/assets/gpt2.tiktoken "$WHISPER_ASSETS"/
    rm -rf "$dl"
  fi
fi
echo "setup: rust targets and .venv ($(.venv/bin/python --version)) ready"
