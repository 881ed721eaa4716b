//! (to be written)

use rbuild_runtime::KernelEntry;

pub const KERNELS: &[KernelEntry] = &[];
