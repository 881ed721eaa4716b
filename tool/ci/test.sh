#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs every test,
# the no_std build for Cortex-M55, and the ExecuTorch round-trip oracle.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Each phase's wall time, printed at the end (and on failure), to see where CI time goes.
phase_log=""
phase() { phase_log+="$(printf '%6ds  %s' "$SECONDS" "$1")"$'\n'; echo "== $1"; }
trap 'echo "== phase start times (s since start)"; printf "%s" "$phase_log"; echo "$(printf "%6ds  end" "$SECONDS")"' EXIT
phase "setup"
bash tool/ci/setup.sh
export RBUILD_PYTHON="$PWD/.venv/bin/python"
phase "no_std build (thumbv8m.main-none-eabihf)"
cargo build -p rbuild-nostd-check --target thumbv8m.main-none-eabihf --release
# The runtime and kernels for the platforms this machine cannot link for (no Xcode, no NDK):
# type-checked for their Rust targets, so a target-specific break shows here; the GPU delegate's
# wgpu runtime for macOS (Metal through wgpu-hal; iOS builds the same backend code).
phase "cargo check runtime + kernels (Apple, Android), wgpu runtime (macOS)"
cargo check -p rbuild-runtime -p rbuild-kernels --target aarch64-apple-darwin --target aarch64-apple-ios --target aarch64-linux-android
cargo check -p rbuild-gpu-wgpu --target aarch64-apple-darwin
# The NEON kernels, against their portable twins, under QEMU user-mode emulation.
phase "kernel tests on aarch64 (qemu-aarch64)"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  cargo test -p rbuild-kernels --lib --release --target aarch64-unknown-linux-gnu
# Runner and firmware builds of every recipe test share one cargo target folder, so their
# dependencies (runtime, kernels, tokenizers, wgpu, …) compile once per target, not per test.
export RBUILD_TARGET_DIR="$PWD/target/rbuild-runners"
phase "test build"
cargo test --workspace --no-run
phase "tests"
cargo test --workspace
