//! Links with the board's generated script: rbuild writes `link.x` (from the platform file's
//! memory map and firmware layout) next to this file in each generated copy.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let script = dir.join("link.x");
    println!("cargo::rerun-if-changed={}", script.display());
    if !script.is_file() {
        println!("cargo::warning=no link.x: this template is built through `rbuild <recipe>`, which generates it");
        return;
    }
    println!("cargo::rustc-link-arg-bins=-T{}", script.display());
    println!("cargo::rustc-link-arg-bins=--nmagic");
}
