//! Gradient operators in ExecuTorch's portable set (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
