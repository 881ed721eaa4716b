//! Portable (reference) kernels, one module per operator family.

use rbuild_runtime::KernelEntry;

pub mod binary;
pub mod conv;
pub mod create;
pub mod index;
pub mod linalg;
pub mod norm;
pub mod prim;
pub mod quant;
pub mod reduce;
pub mod shape;
pub mod unary;
pub mod util;

/// Every portable module's table.
pub const KERNEL_SETS: &[&[KernelEntry]] = &[
    binary::KERNELS,
    unary::KERNELS,
    create::KERNELS,
    prim::KERNELS,
    shape::KERNELS,
    index::KERNELS,
    reduce::KERNELS,
    norm::KERNELS,
    quant::KERNELS,
    linalg::KERNELS,
    conv::KERNELS,
];
