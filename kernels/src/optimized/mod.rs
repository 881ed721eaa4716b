//! Optimized CPU kernels; each replaces a portable twin and is tested against it.

use rbuild_runtime::KernelEntry;

pub const KERNELS: &[KernelEntry] = &[];
