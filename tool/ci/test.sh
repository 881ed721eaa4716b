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
echo "== tests"
cargo test --workspace
