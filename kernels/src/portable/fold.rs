//! col2im: summing sliding blocks back into an image (filled in by the Core ATen work).

rbuild_runtime::kernel_table! {}
