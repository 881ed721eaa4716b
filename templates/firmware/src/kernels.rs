//! Placeholder. rbuild's selective build replaces this file with exactly the program's kernels.

use rbuild_runtime::KernelRegistry;

#[allow(dead_code)]
pub const OPS: &[&str] = &[];

pub fn registry() -> KernelRegistry {
    KernelRegistry::new()
}

/// The CPU delegate backends the program needs (placeholder: none).
#[allow(dead_code)]
pub fn backends() -> rbuild_runtime::backend::BackendRegistry {
    rbuild_runtime::backend::BackendRegistry::new()
}
