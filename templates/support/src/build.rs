//! The templates' build script: with the `embed-program` feature, copies the `.pte` named by
//! `RBUILD_EMBED_PROGRAM` into OUT_DIR so [`crate::embedded_program!`] can `include_bytes!` it,
//! and sets `cfg(rbuild_embedded)`.
//!
//! The feature without the variable only warns (so `cargo test --all-features` still builds);
//! the binary then requires `--model` and says why.

use std::path::PathBuf;

/// The whole of a runner template's `build.rs`.
pub fn embed_program() {
    println!("cargo::rustc-check-cfg=cfg(rbuild_embedded)");
    println!("cargo::rerun-if-env-changed=RBUILD_EMBED_PROGRAM");
    if std::env::var_os("CARGO_FEATURE_EMBED_PROGRAM").is_none() {
        return;
    }
    let Some(src) = std::env::var_os("RBUILD_EMBED_PROGRAM").map(PathBuf::from) else {
        println!("cargo::warning=feature embed-program is on but RBUILD_EMBED_PROGRAM is not set; no program embedded");
        return;
    };
    println!("cargo::rerun-if-changed={}", src.display());
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        eprintln!("error: OUT_DIR is not set (embed_program runs in a cargo build script)");
        std::process::exit(1);
    };
    let out = PathBuf::from(out_dir).join("program.pte");
    if let Err(e) = std::fs::copy(&src, &out) {
        eprintln!("error: RBUILD_EMBED_PROGRAM={}: {e}", src.display());
        std::process::exit(1);
    }
    println!("cargo::rustc-cfg=rbuild_embedded");
}
