#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs every test,
# the no_std build for Cortex-M55, and the ExecuTorch round-trip oracle.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Each phase's wall time, printed at the end (and on failure), to see where CI time goes.
phase_log=""
phase() { phase_log+="$(printf '%6ds  %s' "$SECONDS" "$1")"$'\n'; echo "== $1"; }
trap 'echo "== phase start times (s since start)"; printf "%s" "$phase_log"; echo "$(printf "%6ds  end" "$SECONDS")"; df -h . | tail -1' EXIT
phase "setup"
bash tool/ci/setup.sh
export RBUILD_PYTHON="$PWD/.venv/bin/python"
# Disk: a CI machine may have only a few GB free (one run died with "No space left on device"
# at ~6.5 GB of build output). A clean build never reuses incremental caches (1.4 GB), test
# binaries need no debug info (panic messages still name file and line; ~20 of each test
# binary's ~26 MB), and each cross target's folder goes once its phase is done.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_STRIP=debuginfo
export CARGO_PROFILE_DEV_DEBUG=false
disk() { df -h . | awk 'NR == 2 { print "   disk: " $3 " used, " $4 " free" }'; }
disk
phase "no_std build (thumbv8m.main-none-eabihf)"
cargo build -p rbuild-nostd-check --target thumbv8m.main-none-eabihf --release
rm -rf target/thumbv8m.main-none-eabihf
# The runtime and kernels for the platforms this machine cannot link for (no Xcode, no NDK):
# type-checked for their Rust targets, so a target-specific break shows here; the GPU delegate's
# wgpu runtime for macOS (Metal through wgpu-hal; iOS builds the same backend code).
phase "cargo check runtime + kernels (Apple, Android), wgpu runtime (macOS)"
cargo check -p rbuild-runtime -p rbuild-kernels --target aarch64-apple-darwin --target aarch64-apple-ios --target aarch64-linux-android
cargo check -p rbuild-gpu-wgpu --target aarch64-apple-darwin
rm -rf target/aarch64-apple-darwin target/aarch64-apple-ios target/aarch64-linux-android
# The NEON kernels, against their portable twins, under QEMU user-mode emulation.
phase "kernel tests on aarch64 (qemu-aarch64)"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  cargo test -p rbuild-kernels --lib --release --target aarch64-unknown-linux-gnu
rm -rf target/aarch64-unknown-linux-gnu target/release
disk
# Runner and firmware builds of every recipe test share one cargo target folder, so their
# dependencies (runtime, kernels, tokenizers, wgpu, …) compile once per target, not per test.
export RBUILD_TARGET_DIR="$PWD/target/rbuild-runners"
phase "test build"
cargo test --workspace --no-run
disk
phase "tests"
cargo test --workspace
disk
