#!/usr/bin/env bash
# Code size of rbuild's runtime core on Cortex-M55 (thumbv8m.main-none-eabihf), release, fat
# LTO, without symbols: the firmware of `rbuild mobilenet-cortex-m` rebuilt with ZERO kernels
# registered. It still parses the .pte, loads the method (failing cleanly on the missing
# operators, so the whole loader and executor stay linked), prints over semihosting and owns
# startup, fault handlers and the allocator. The code region (.text + .rodata + .ARM.exidx +
# vector table) is the number to compare with ExecuTorch's ~116 KB core; the embedded program
# and input live in their own section and are not counted.
#
#   bash tool/bench/firmware_size.sh            # after `rbuild mobilenet-cortex-m`
#   OPT=z bash tool/bench/firmware_size.sh      # the same at opt-level "z"
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${RBUILD_OUT:-$repo/out}
src=$out/mobilenet-cortex-m/corstone-300/firmware-src
[ -f "$src/Cargo.toml" ] || { echo "no $src: run \`rbuild mobilenet-cortex-m\` first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/core"
cat > "$work/core/src/kernels.rs" <<'RS'
//! No kernels: the runtime core alone.
use rbuild_runtime::KernelRegistry;
pub const OPS: &[&str] = &[];
pub fn registry() -> KernelRegistry {
    KernelRegistry::new()
}
RS
# link.x is referenced by absolute path from build.rs (CARGO_MANIFEST_DIR), so it moves along.
opt=${OPT:-3}
CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt CARGO_TARGET_THUMBV8M_MAIN_NONE_EABIHF_RUSTFLAGS="-C target-cpu=cortex-m55" \
    cargo build --quiet --release --manifest-path "$work/core/Cargo.toml" --target thumbv8m.main-none-eabihf \
    --target-dir "$out/.target-size"
elf="$out/.target-size/thumbv8m.main-none-eabihf/release/firmware"
size() { arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s { print $2 }'; }
code() { arm-none-eabi-size -A "$1" | awk '$1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" || $1 == ".ARM.exidx" || $1 == ".data" { n += $2 } END { print n }'; }
echo "opt-level $opt, fat LTO, panic=abort, thumbv8m.main-none-eabihf, -C target-cpu=cortex-m55"
echo "runtime core, zero kernels:  .text $(size "$elf" .text)  .rodata $(size "$elf" .rodata)  code region total $(code "$elf") bytes"
full="$out/mobilenet-cortex-m/corstone-300/firmware.elf"
if [ -f "$full" ]; then
    echo "MobileNetV2 firmware (as built): .text $(size "$full" .text)  .rodata $(size "$full" .rodata)  code region total $(code "$full") bytes  (program $(size "$full" .rbuild_program) bytes in its own section)"
fi
