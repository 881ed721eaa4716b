//! Run-time integers and state writes, emitted under their own schema (ExecuTorch's prim ops
//! take their arguments, then the result value).

pub(super) const SCHEMAS: &[(&str, &str)] = &[
    // Run-time integers (emitted as ExecuTorch's prim ops: arguments, then the result value).
    ("aten::sym_size.int(Tensor self, int dim) -> SymInt", "aten::sym_size.int(Tensor self, int dim) -> SymInt"),
    ("aten::_local_scalar_dense(Tensor self) -> Scalar", "aten::_local_scalar_dense(Tensor self) -> Scalar"),
    // Stores a value into mutable state (ExecuTorch's write-back of a mutated buffer); emitted
    // under its own in-place schema, its result being the state it writes.
    (
        "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
        "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    ),
    // Integer arithmetic on run-time sizes (ExecuTorch's prim ops; a SymBool is an integer 0/1 here).
    ("aten::sym_numel(Tensor self) -> SymInt", "aten::sym_numel(Tensor self) -> SymInt"),
    ("executorch_prim::add.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::add.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::sub.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::sub.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::mul.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::mul.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::floordiv.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::floordiv.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::mod.Scalar(SymInt a, SymInt b) -> SymInt", "executorch_prim::mod.Scalar(SymInt a, SymInt b) -> SymInt"),
    ("executorch_prim::neg.Scalar(Scalar a) -> Scalar", "executorch_prim::neg.Scalar(Scalar a) -> Scalar"),
    ("executorch_prim::eq.Scalar(Scalar a, Scalar b) -> bool", "executorch_prim::eq.Scalar(Scalar a, Scalar b) -> bool"),
    ("executorch_prim::lt.Scalar(Scalar a, Scalar b) -> bool", "executorch_prim::lt.Scalar(Scalar a, Scalar b) -> bool"),
    ("executorch_prim::le.Scalar(Scalar a, Scalar b) -> bool", "executorch_prim::le.Scalar(Scalar a, Scalar b) -> bool"),
    ("executorch_prim::gt.Scalar(Scalar a, Scalar b) -> bool", "executorch_prim::gt.Scalar(Scalar a, Scalar b) -> bool"),
    ("executorch_prim::ge.Scalar(Scalar a, Scalar b) -> bool", "executorch_prim::ge.Scalar(Scalar a, Scalar b) -> bool"),
    ("executorch_prim::sym_max.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::sym_max.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::sym_min.Scalar(Scalar a, Scalar b) -> Scalar", "executorch_prim::sym_min.Scalar(Scalar a, Scalar b) -> Scalar"),
    ("executorch_prim::sym_not.Scalar(Scalar a) -> bool", "executorch_prim::sym_not.Scalar(Scalar a) -> bool"),
];
