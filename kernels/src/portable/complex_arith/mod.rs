//! Complex arithmetic for the kernels that take complex64/complex128 tensors where ExecuTorch's
//! portable library does: `add.out`, `mul.out`, `div.out`, `abs.out`, `sum.IntList_out` and
//! `bmm.out`. Elements are interleaved `[re, im]` pairs; every value is computed in f64 and
//! rounded once into the out's precision. Real operands next to a complex one read as `x + 0i`
//! (PyTorch's promotion); a complex result needs a complex out.

//!
//! Complex support is a dtype-selective build choice (feature `complex`, on by default): a
//! runner whose program holds no complex tensor is built without it, and these kernels then
//! refuse complex tensors with an error instead of linking the arithmetic.

use rbuild_runtime::kernel::{KernelArgs, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::ScalarType;

use super::reduce::Plan;

#[cfg(feature = "complex")]
mod imp;

pub(super) fn is_complex(dtype: ScalarType) -> bool {
    matches!(dtype, ScalarType::ComplexFloat | ScalarType::ComplexDouble)
}

/// An elementwise op of two complex operands.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "complex"), allow(dead_code))]
pub(super) enum BinaryOp {
    /// `a + alpha · b`.
    Add(f64),
    Mul,
    Div,
}

/// Why a kernel of a build without complex support cannot take a complex tensor.
#[cfg(not(feature = "complex"))]
fn not_built(name: &str) -> rbuild_runtime::KernelError {
    rbuild_runtime::kerr!("{name}: complex tensors need rbuild-kernels' `complex` feature (the selective build enables it for programs that hold complex tensors)")
}

/// `out = a op b` over tensors `a`, `b` broadcast together, when either (or out) is complex.
pub(super) fn binary(args: &KernelArgs<'_>, a: usize, b: usize, out: usize, op: BinaryOp, name: &str) -> KernelResult {
    #[cfg(feature = "complex")]
    return imp::binary(args, a, b, out, op, name);
    #[cfg(not(feature = "complex"))]
    {
        let _ = (args, a, b, out, op);
        Err(not_built(name))
    }
}

/// `abs` of a complex tensor (args[0]) into a real floating out (args[out]): the magnitude.
pub(super) fn abs(args: &KernelArgs<'_>, out: usize) -> KernelResult {
    #[cfg(feature = "complex")]
    return imp::abs(args, out);
    #[cfg(not(feature = "complex"))]
    {
        let _ = (args, out);
        Err(not_built("abs.out"))
    }
}

/// Sums each reduction group of `inp` (as `plan` lays them out) into the complex `out`.
pub(super) fn sum(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, plan: &Plan) -> KernelResult {
    #[cfg(feature = "complex")]
    return imp::sum(inp, out, plan);
    #[cfg(not(feature = "complex"))]
    {
        let _ = (inp, out, plan);
        Err(not_built("sum"))
    }
}

/// `bmm.out` of two complex tensors of one dtype (args = [self, mat2, out, out]).
pub(super) fn bmm(args: &KernelArgs<'_>) -> KernelResult {
    #[cfg(feature = "complex")]
    return imp::bmm(args);
    #[cfg(not(feature = "complex"))]
    {
        let _ = args;
        Err(not_built("bmm.out"))
    }
}
