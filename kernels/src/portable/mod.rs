//! Portable (reference) kernels, one module per operator family.

use rbuild_runtime::KernelEntry;

pub mod arith;
pub mod backward;
pub mod binary;
pub mod bitwise;
pub mod comparison;
pub mod complex;
pub mod complex_arith;
pub mod conv;
pub mod copy;
pub mod create;
pub mod distance;
pub mod embedding_bag;
pub mod fft;
pub mod fill;
pub mod fold;
pub mod grid_sample;
pub mod index;
pub mod index_put;
pub mod linalg;
pub mod llm;
pub mod masked;
pub mod math;
pub mod norm;
pub mod pad;
pub mod pool3d;
pub mod prim;
pub mod qint8;
pub mod quant;
pub mod quant_linear;
pub mod random;
pub mod rearrange;
pub mod reduce;
pub mod resample;
pub mod scatter;
pub mod shape;
pub mod sort;
pub mod stats;
pub mod strided;
#[cfg(test)]
mod test_util;
pub mod unary;
pub mod util;
pub mod whisper;

/// Every portable module's table.
pub const KERNEL_SETS: &[&[KernelEntry]] = &[
    binary::KERNELS,
    comparison::KERNELS,
    bitwise::KERNELS,
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
    arith::KERNELS,
    backward::KERNELS,
    copy::KERNELS,
    fill::KERNELS,
    distance::KERNELS,
    grid_sample::KERNELS,
    math::KERNELS,
    pad::KERNELS,
    rearrange::KERNELS,
    random::KERNELS,
    scatter::KERNELS,
    index_put::KERNELS,
    masked::KERNELS,
    sort::KERNELS,
    stats::KERNELS,
    complex::KERNELS,
    embedding_bag::KERNELS,
    fft::KERNELS,
    fold::KERNELS,
    pool3d::KERNELS,
];

/// Every portable module's op → kernel path list, in the order of `KERNEL_SETS`.
pub const KERNEL_PATH_SETS: &[&[(&str, &str)]] = &[
    binary::KERNEL_PATHS,
    comparison::KERNEL_PATHS,
    bitwise::KERNEL_PATHS,
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
    arith::KERNEL_PATHS,
    backward::KERNEL_PATHS,
    copy::KERNEL_PATHS,
    fill::KERNEL_PATHS,
    distance::KERNEL_PATHS,
    grid_sample::KERNEL_PATHS,
    math::KERNEL_PATHS,
    pad::KERNEL_PATHS,
    rearrange::KERNEL_PATHS,
    random::KERNEL_PATHS,
    scatter::KERNEL_PATHS,
    index_put::KERNEL_PATHS,
    masked::KERNEL_PATHS,
    sort::KERNEL_PATHS,
    stats::KERNEL_PATHS,
    complex::KERNEL_PATHS,
    embedding_bag::KERNEL_PATHS,
    fft::KERNEL_PATHS,
    fold::KERNEL_PATHS,
    pool3d::KERNEL_PATHS,
];
