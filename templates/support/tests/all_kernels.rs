//! The all-kernels table templates re-export: its interface, which a selective build's replacement
//! must also keep.

use rbuild_runner_support::all_kernels::{registry, OPS};

#[test]
fn ops_lists_exactly_what_registry_registers() {
    let registered: Vec<&str> = registry().ops().collect();
    assert_eq!(OPS, registered.as_slice());
}

#[test]
fn ops_has_no_duplicates() {
    let mut sorted = OPS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), OPS.len());
}
