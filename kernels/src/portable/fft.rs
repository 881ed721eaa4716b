//! Real-to-complex and complex-to-real FFTs (filled in by the Core ATen work).

rbuild_runtime::kernel_table! {}
