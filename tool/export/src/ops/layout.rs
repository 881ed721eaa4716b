//! Layout and indexing: copy forms of views, concatenation and splits, gathers and scatters,
//! padding, and the ops whose result size depends on the data.

pub(super) const SCHEMAS: &[(&str, &str)] = &[
    ("aten::permute_copy(Tensor self, int[] dims) -> Tensor", "aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::view_copy(Tensor self, SymInt[] size) -> Tensor", "aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
        "aten::clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::cat(Tensor[] tensors, int dim=0) -> Tensor", "aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::slice_copy.Tensor(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
        "aten::slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::expand_copy(Tensor self, SymInt[] size, *, bool implicit=False) -> Tensor",
        "aten::expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::select_copy.int(Tensor self, int dim, SymInt index) -> Tensor",
        "aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor",
        "aten::transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::unsqueeze_copy(Tensor self, int dim) -> Tensor", "aten::unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::squeeze_copy.dims(Tensor self, int[] dim) -> Tensor",
        "aten::squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::alias_copy(Tensor self) -> Tensor", "aten::alias_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::repeat(Tensor self, SymInt[] repeats) -> Tensor", "aten::repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::split_with_sizes_copy(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]",
        "aten::split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] out) -> ()",
    ),
    (
        "aten::index_select(Tensor self, int dim, Tensor index) -> Tensor",
        "aten::index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
        "aten::index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Core ATen gathers, scatters, padding and flips of imported programs.
    ("aten::flip(Tensor self, int[] dims) -> Tensor", "aten::flip.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor",
        "aten::constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::reflection_pad1d(Tensor self, SymInt[2] padding) -> Tensor",
        "aten::reflection_pad1d.out(Tensor self, SymInt[2] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor",
        "aten::reflection_pad2d.out(Tensor self, SymInt[4] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor",
        "aten::reflection_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor",
        "aten::replication_pad2d.out(Tensor self, SymInt[4] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor",
        "aten::replication_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
        "aten::gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
        "aten::scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
        "aten::scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
        "aten::scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
        "aten::scatter_reduce.two_out(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
        "aten::select_scatter.out(Tensor self, Tensor src, int dim, SymInt index, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
        "aten::slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
        "aten::index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor",
        "aten::masked_scatter.out(Tensor self, Tensor mask, Tensor source, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor",
        "aten::copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::fill.Scalar(Tensor self, Scalar value) -> Tensor", "aten::fill.Scalar_out(Tensor self, Scalar value, *, Tensor(a!) out) -> Tensor(a!)"),
    // Data-dependent sizes: the result has a dim that is a new symbol bounded by a worst case (shape_dynamic.rs).
    ("aten::nonzero(Tensor self) -> Tensor", "aten::nonzero.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::masked_select(Tensor self, Tensor mask) -> Tensor", "aten::masked_select.out(Tensor self, Tensor mask, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor",
        "aten::repeat_interleave.Tensor_out(Tensor repeats, *, SymInt? output_size=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Copy forms of views and other layout ops ExecuTorch's portable library runs (PyTorch's schemas).
    (
        "aten::diagonal_copy(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor",
        "aten::diagonal_copy.out(Tensor self, int offset=0, int dim1=0, int dim2=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::as_strided_copy(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor",
        "aten::as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::squeeze_copy.dim(Tensor self, int dim) -> Tensor", "aten::squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::t_copy(Tensor self) -> Tensor", "aten::t_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::detach_copy(Tensor self) -> Tensor", "aten::detach_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor",
        "aten::narrow_copy.out(Tensor self, int dim, SymInt start, SymInt length, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::unfold_copy(Tensor self, int dimension, int size, int step) -> Tensor",
        "aten::unfold_copy.out(Tensor self, int dimension, int size, int step, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::split_copy.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]",
        "aten::split_copy.Tensor_out(Tensor self, SymInt split_size, int dim=0, *, Tensor(a!)[] out) -> ()",
    ),
    ("aten::unbind_copy.int(Tensor self, int dim=0) -> Tensor[]", "aten::unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out) -> ()"),
    ("aten::stack(Tensor[] tensors, int dim=0) -> Tensor", "aten::stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor",
        "aten::roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::tril(Tensor self, int diagonal=0) -> Tensor", "aten::tril.out(Tensor self, int diagonal=0, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::pixel_shuffle(Tensor self, int upscale_factor) -> Tensor",
        "aten::pixel_shuffle.out(Tensor self, int upscale_factor, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor",
        "aten::pixel_unshuffle.out(Tensor self, int downscale_factor, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::replication_pad1d(Tensor self, SymInt[2] padding) -> Tensor",
        "aten::replication_pad1d.out(Tensor self, SymInt[2] padding, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::fill.Tensor(Tensor self, Tensor value) -> Tensor", "aten::fill.Tensor_out(Tensor self, Tensor value, *, Tensor(a!) out) -> Tensor(a!)"),
];
