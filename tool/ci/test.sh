#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs every test,
# the no_std build for Cortex-M55, and the ExecuTorch round-trip oracle.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh
export RBUILD_PYTHON="$PWD/.venv/bin/python"
echo "== no_std build (thumbv8m.main-none-eabihf)"
cargo build -p rbuild-nostd-check --target thumbv8m.main-none-eabihf --release
# The runtime and kernels for the platforms this machine cannot link for (no Xcode, no NDK):
# type-checked for their Rust targets, so a target-specific break shows here.
for target in aarch64-apple-darwin aarch64-apple-ios aarch64-linux-android; do
  echo "== cargo check runtime + kernels ($target)"
  cargo check -p rbuild-runtime -p rbuild-kernels --target "$target"
done
# The GPU delegate's wgpu runtime on Apple's targets (Metal through wgpu-hal).
for target in aarch64-apple-darwin aarch64-apple-ios; do
  echo "== cargo check GPU runtime ($target)"
  cargo check -p rbuild-gpu-wgpu --target "$target"
done
# The NEON kernels, against their portable twins, under QEMU user-mode emulation.
echo "== kernel tests on aarch64 (qemu-aarch64)"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  cargo test -p rbuild-kernels --lib --release --target aarch64-unknown-linux-gnu
# Every platform the shipped recipes name must be buildable here after setup: a build skips a
# platform whose tools are missing (and says so), so CI asks for all of them with --strict.
echo "== every recipe's platforms have their tools (rbuild plan --strict)"
cargo build -p rbuild
for recipe in recipes/*.kdl; do
  target/debug/rbuild plan "$(basename "$recipe" .kdl)" --strict > /dev/null
done
echo "== tests"
cargo test --workspace
