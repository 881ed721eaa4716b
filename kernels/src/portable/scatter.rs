//! Writes at indices and masks; selections by mask (filled in by the portable-set work).

rbuild_runtime::kernel_table! {}
