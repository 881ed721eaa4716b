//! 3-D pooling: average, max with indices, adaptive average (filled in by the Core ATen work).

rbuild_runtime::kernel_table! {}
