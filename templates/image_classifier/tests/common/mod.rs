//! Shared test data: `../shared/testdata` beside the checkout.

use std::path::PathBuf;

pub fn testdata(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    root.join(rel).to_string_lossy().into_owned()
}
