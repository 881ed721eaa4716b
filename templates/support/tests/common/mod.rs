//! Shared test helpers: test data paths, scratch folders, a tiktoken rank file.

#![allow(dead_code)]

use std::path::PathBuf;

mod tiktoken_ranks;
#[allow(unused_imports)]
pub use tiktoken_ranks::{rank_file, MERGES};

pub fn testdata(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    root.join(rel).to_string_lossy().into_owned()
}

/// A fresh, empty scratch folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rbuild-support-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
