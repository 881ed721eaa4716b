//! Placeholder. rbuild's selective build replaces this file with exactly the program's kernels.

use rbuild_runtime::KernelRegistry;

#[allow(dead_code)]
pub const OPS: &[&str] = &[];

pub fn registry() -> KernelRegistry {
    KernelRegistry::new()
}
