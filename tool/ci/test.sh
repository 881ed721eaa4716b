#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs every test,
# the no_std build for Cortex-M55, and the ExecuTorch round-trip oracle.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tool/ci/setup.sh
export RBUILD_PYTHON="$PWD/.venv/bin/python"
echo "== no_std build (thumbv8m.main-none-eabihf)"
cargo build -p rbuild-nostd-check --target thumbv8m.main-none-eabihf --release
echo "== tests"
cargo test --workspace
