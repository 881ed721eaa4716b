//! Elementwise math functions without a kernel elsewhere (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
