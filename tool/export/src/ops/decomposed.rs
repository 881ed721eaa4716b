//! Ops the builder may use that have no out variant: the decomposition pass rewrites them
//! before emission.

pub(super) const SCHEMAS: &[(&str, &str)] = &[
    // Not Core ATen: the builder may use these; the decomposition pass rewrites them.
    ("aten::hardswish(Tensor self) -> Tensor", ""),
    ("aten::hardsigmoid(Tensor self) -> Tensor", ""),
    ("aten::silu(Tensor self) -> Tensor", ""),
    ("aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", ""),
    ("aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", ""),
    ("aten::dropout(Tensor input, float p, bool train) -> Tensor", ""),
];
