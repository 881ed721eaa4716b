//! Pairwise distances (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
