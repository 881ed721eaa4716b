//! Where the shared reference data is, and how the tests list it: every `.pte` below a folder,
//! sorted, so new cases are picked up without code changes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `../shared/testdata` beside the checkout.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata")
}

/// Every `.pte` file below `dir` (none when it does not exist), sorted by path.
pub fn pte_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "pte") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}
