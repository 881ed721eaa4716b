//! Copies, fills and rearrangements of whole tensors (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
