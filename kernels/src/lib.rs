//! Kernels for rbuild's runtime, keyed by operator name (`namespace::name.overload`).
//!
//! - [`portable`]: plain reference implementations for every supported dtype; each is the
//!   oracle its optimized twin is tested against.
//! - [`optimized`]: fast paths (GEMM-backed convolution/linear, SIMD-friendly depthwise) that
//!   replace portable entries in [`registry`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod optimized;
pub mod portable;

use rbuild_runtime::KernelRegistry;

/// Every kernel: portable, then optimized entries replacing their portable twins.
pub fn registry() -> KernelRegistry {
    let mut r = portable_registry();
    r.register(optimized::KERNELS);
    r
}

/// Only the portable (reference) kernels.
pub fn portable_registry() -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for set in portable::KERNEL_SETS {
        r.register(set);
    }
    r
}
