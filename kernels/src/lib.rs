//! Kernels for rbuild's runtime, keyed by operator name (`namespace::name.overload`).
//!
//! - [`portable`]: plain reference implementations for every supported dtype; each is the
//!   oracle its optimized twin is tested against.
//! - [`optimized`]: fast paths (GEMM-backed convolution/linear, SIMD-friendly depthwise) that
//!   replace portable entries in [`registry`].
//! - [`nhwc`]: channels-last convolution, depthwise and fully-connected kernels (f32 and
//!   XNNPACK-exact int8) with packed weights and SIMD micro-kernels;
//! - [`xnnpack`]: the `XnnpackBackend` delegate, running ExecuTorch's XNNPACK payloads on them.
//! - [`gpu_reference`]: the CPU reference runtime of the `RbuildGpuBackend` delegate payload
//!   (an interpreter built on the portable functions, and a `Backend` wrapping it).
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod dtypes;
pub mod gpu_reference;
pub mod nhwc;
pub mod xnnpack;
pub mod optimized;
pub mod portable;

use rbuild_runtime::KernelRegistry;

/// Every kernel: portable, then optimized entries replacing their portable twins.
pub fn registry() -> KernelRegistry {
    let mut r = portable_registry();
    r.register(optimized::KERNELS);
    r
}

/// Operator → Rust path of the kernel `registry()` uses for it (optimized over portable), for
/// generated registration tables in selective builds. Sorted by operator.
pub fn catalog() -> alloc::vec::Vec<(&'static str, &'static str)> {
    let mut map = alloc::collections::BTreeMap::new();
    for set in portable::KERNEL_PATH_SETS.iter().chain([&optimized::KERNEL_PATHS]) {
        for &(op, path) in set.iter() {
            map.insert(op, path);
        }
    }
    map.into_iter().collect()
}

/// The catalog for Cortex-M firmware: [`catalog`] with the Cortex-M int8 kernels
/// ([`optimized::cortex_m`]) in place of their portable twins.
pub fn catalog_cortex_m() -> alloc::vec::Vec<(&'static str, &'static str)> {
    let mut map: alloc::collections::BTreeMap<_, _> = catalog().into_iter().collect();
    for &(op, path) in optimized::cortex_m::KERNEL_PATHS {
        map.insert(op, path);
    }
    map.into_iter().collect()
}

/// Prefix of the selective-build entries that name a CPU delegate backend instead of a kernel
/// (`delegate::XnnpackBackend`).
pub const DELEGATE_PREFIX: &str = "delegate::";

/// Delegate backends that run on these kernels: (`delegate::<BackendDelegate.id>`, Rust path of
/// the backend value), for generated registration code in selective builds.
pub fn backend_catalog() -> alloc::vec::Vec<(&'static str, &'static str)> {
    alloc::vec![("delegate::XnnpackBackend", "rbuild_kernels::xnnpack::XnnpackBackend")]
}

/// Only the portable (reference) kernels.
pub fn portable_registry() -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for set in portable::KERNEL_SETS {
        r.register(set);
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn catalog_names_the_kernel_registry_uses_for_every_op() {
        let reg = super::registry();
        let cat = super::catalog();
        assert_eq!(cat.len(), reg.len());
        for (op, path) in &cat {
            assert!(reg.lookup(op).is_some(), "{op} in catalog, not in registry");
            assert!(path.starts_with("rbuild_kernels::") && !path.contains(' '), "{path}");
        }
        let conv = cat.iter().find(|(op, _)| *op == "aten::convolution.out").unwrap().1;
        assert_eq!(conv, "rbuild_kernels::optimized::conv::convolution_out", "optimized kernels win");
    }
}
