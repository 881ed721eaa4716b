//! Reductions with indices, products and variances (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
