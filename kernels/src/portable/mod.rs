//! Portable (reference) kernels, one module per operator family.

use rbuild_runtime::KernelEntry;

pub mod binary;
pub mod conv;
pub mod create;
pub mod index;
pub mod linalg;
pub mod llm;
pub mod norm;
pub mod prim;
pub mod qint8;
pub mod quant;
pub mod quant_linear;
pub mod reduce;
pub mod resample;
pub mod shape;
pub mod unary;
pub mod util;
pub mod whisper;

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
    resample::KERNELS,
    llm::KERNELS,
    quant_linear::KERNELS,
    qint8::KERNELS,
    whisper::KERNELS,
];

/// Every portable module's op → kernel path list, in the order of `KERNEL_SETS`.
pub const KERNEL_PATH_SETS: &[&[(&str, &str)]] = &[
    binary::KERNEL_PATHS,
    unary::KERNEL_PATHS,
    create::KERNEL_PATHS,
    prim::KERNEL_PATHS,
    shape::KERNEL_PATHS,
    index::KERNEL_PATHS,
    reduce::KERNEL_PATHS,
    norm::KERNEL_PATHS,
    quant::KERNEL_PATHS,
    linalg::KERNEL_PATHS,
    conv::KERNEL_PATHS,
    resample::KERNEL_PATHS,
    llm::KERNEL_PATHS,
    quant_linear::KERNEL_PATHS,
    qint8::KERNEL_PATHS,
    whisper::KERNEL_PATHS,
];
