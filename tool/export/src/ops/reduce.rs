//! Reductions, scans, statistics and selections over dims.

pub(super) const SCHEMAS: &[(&str, &str)] = &[
    (
        "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
        "aten::cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
        "aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
        "aten::any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        "aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        "aten::amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
        "aten::argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Core ATen reductions, statistics and selections of imported programs.
    ("aten::any(Tensor self) -> Tensor", "aten::any.all_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::mean(Tensor self, *, ScalarType? dtype=None) -> Tensor",
        "aten::mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
        "aten::argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::prod(Tensor self, *, ScalarType? dtype=None) -> Tensor",
        "aten::prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "aten::prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
        "aten::var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
        "aten::var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Several outputs: the out variants name them (PyTorch's schemas; ExecuTorch's portable kernels, `sort.values` rbuild's).
    ("aten::max(Tensor self) -> Tensor", "aten::max.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::min(Tensor self) -> Tensor", "aten::min.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
        "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
    ),
    (
        "aten::min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
        "aten::min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!) min_indices) -> (Tensor(a!) values, Tensor(b!) indices)",
    ),
    (
        "aten::var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)",
        "aten::var_mean.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))",
    ),
    (
        "aten::topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
        "aten::topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
    ),
    (
        "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
        "aten::sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
    ),
];
