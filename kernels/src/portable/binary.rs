//! Elementwise binary operators with broadcasting and PyTorch's dtype rules: arithmetic
//! (`add`, `sub`, `mul`, `div`, `pow`, `maximum`/`minimum`) and `where`, plus the operand,
//! broadcasting and row-loop helpers that the other elementwise modules (comparison.rs,
//! bitwise.rs, arith.rs, unary.rs) share.
//!
//! Slow paths read any dtype through `Elems` and compute in f64 (floating out) or i64 (integer or
//! bool out). Hot combinations (all-f32 arithmetic, same-dtype `where`) run typed loops instead.

use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::kernel::{Element, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, Scalar, ScalarType, Value};

use super::complex_arith::{self, BinaryOp};
use super::util::{broadcast_shapes, broadcast_strides, for_each_broadcast, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::add.out" => add_out,
    "aten::add.Scalar_out" => add_scalar_out,
    "aten::sub.out" => sub_out,
    "aten::sub.Scalar_out" => sub_scalar_out,
    "aten::mul.out" => mul_out,
    "aten::mul.Scalar_out" => mul_scalar_out,
    "aten::div.out" => div_out,
    "aten::div.out_mode" => div_out_mode,
    "aten::div.Scalar_out" => div_scalar_out,
    "aten::div.Scalar_mode_out" => div_scalar_mode_out,
    "aten::pow.Tensor_Tensor_out" => pow_tensor_tensor_out,
    "aten::pow.Tensor_Scalar_out" => pow_tensor_scalar_out,
    "aten::pow.Scalar_out" => pow_scalar_out,
    "aten::maximum.out" => maximum_out,
    "aten::minimum.out" => minimum_out,
    "aten::where.self_out" => where_self_out,
}

// ---------------------------------------------------------------------------------------------
// Operands, broadcasting plans and typed row loops (shared with the other elementwise modules).

/// An input of an elementwise op: a tensor, or a `Scalar` argument acting as a 0-dim tensor.
#[derive(Clone, Copy)]
pub(super) enum Operand<'a> {
    Tensor(TensorRef<'a>),
    Scalar(Scalar),
}

impl<'a> Operand<'a> {
    pub(super) fn tensor(args: &KernelArgs<'a>, i: usize) -> KernelResult<Self> {
        Ok(Operand::Tensor(args.tensor(i)?))
    }

    pub(super) fn scalar(args: &KernelArgs<'a>, i: usize) -> KernelResult<Self> {
        Ok(Operand::Scalar(args.scalar(i)?))
    }

    fn sizes(&self) -> &[usize] {
        match self {
            Operand::Tensor(t) => t.sizes(),
            Operand::Scalar(_) => &[],
        }
    }

    /// The tensor's dtype; None for a scalar.
    pub(super) fn dtype(&self) -> Option<ScalarType> {
        match self {
            Operand::Tensor(t) => Some(t.dtype),
            Operand::Scalar(_) => None,
        }
    }

    pub(super) fn is_floating(&self) -> bool {
        match self {
            Operand::Tensor(t) => t.dtype.is_floating(),
            Operand::Scalar(s) => s.is_floating(),
        }
    }

    /// Integer or bool.
    pub(super) fn is_integral(&self) -> bool {
        match self {
            Operand::Tensor(t) => t.dtype.is_integral(true),
            Operand::Scalar(s) => !s.is_floating(),
        }
    }

    pub(super) fn is_bool(&self) -> bool {
        match self {
            Operand::Tensor(t) => t.dtype == ScalarType::Bool,
            Operand::Scalar(s) => matches!(s, Scalar::Bool(_)),
        }
    }

    /// Element reader. A floating scalar is first rounded to the dtype PyTorch computes in next
    /// to a `peer` tensor (its own floating dtype, else Float), so `x == 0.1` on an f32 tensor
    /// compares against f32(0.1) as PyTorch does.
    pub(super) fn src(&self, peer: Option<ScalarType>) -> KernelResult<Src<'a>> {
        Ok(match *self {
            Operand::Tensor(t) => Src::Elems(Elems::of(&t)?),
            Operand::Scalar(Scalar::Double(d)) => {
                let rounded = match peer.filter(|p| p.is_floating()).unwrap_or(ScalarType::Float) {
                    ScalarType::Float => d as f32 as f64,
                    ScalarType::Half => f16::from_f64(d).to_f64(),
                    ScalarType::BFloat16 => bf16::from_f64(d).to_f64(),
                    _ => d,
                };
                Src::Const(rounded, d as i64)
            }
            Operand::Scalar(s) => Src::Const(s.to_f64(), s.to_i64()),
        })
    }
}

/// Dtype-erased element access: a tensor's elements or one broadcast constant (f64, i64 forms).
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    Elems(Elems<'a>),
    Const(f64, i64),
}

impl Src<'_> {
    #[inline]
    pub(super) fn f64(&self, i: usize) -> f64 {
        match self {
            Src::Elems(e) => e.f64(i),
            Src::Const(f, _) => *f,
        }
    }
    #[inline]
    pub(super) fn i64(&self, i: usize) -> i64 {
        match self {
            Src::Elems(e) => e.i64(i),
            Src::Const(_, v) => *v,
        }
    }
    #[inline]
    pub(super) fn bool(&self, i: usize) -> bool {
        match self {
            Src::Elems(e) => e.bool(i),
            Src::Const(f, _) => *f != 0.0,
        }
    }
}

/// The output sizes of broadcasting `ops` together, and each operand's strides into them.
/// Non-contiguous dim orders are accepted only when every operand with more than one element
/// has the output's sizes and dim order (linear positions then line up).
pub(super) fn broadcast_plan(ops: &[Operand<'_>], out: &TensorMut<'_>) -> KernelResult<(Vec<usize>, Vec<Vec<usize>>)> {
    let mut sizes = Vec::new();
    for op in ops {
        sizes = broadcast_shapes(&sizes, op.sizes())?;
    }
    let tensors = || ops.iter().filter_map(|o| if let Operand::Tensor(t) = o { Some(t) } else { None });
    let contiguous = out.dim_order.is_contiguous() && tensors().all(|t| t.dim_order.is_contiguous());
    if !contiguous
        && !tensors().all(|t| t.numel() == 1 || (t.sizes() == sizes.as_slice() && t.dim_order == out.dim_order))
    {
        return Err(kerr!(
            "broadcasting with non-contiguous dim orders is not supported (out dim order {:?}, inputs {:?})",
            out.dim_order,
            tensors().map(|t| t.dim_order).collect::<Vec<_>>()
        ));
    }
    let strides = ops.iter().map(|o| broadcast_strides(o.sizes(), &sizes)).collect::<KernelResult<Vec<_>>>()?;
    Ok((sizes, strides))
}

/// The operand as a `T` slice: tensor data of exactly that element type, or the scalar converted
/// by `conv` into `store` (None when `conv` refuses it or the dtype differs).
pub(super) fn view<'s, T: Element>(
    op: Operand<'s>,
    store: &'s mut [T; 1],
    conv: impl Fn(Scalar) -> Option<T>,
) -> Option<&'s [T]> {
    match op {
        Operand::Tensor(t) => t.data::<T>().ok(),
        Operand::Scalar(s) => {
            store[0] = conv(s)?;
            Some(&store[..])
        }
    }
}

/// PyTorch casts a scalar to the f32 tensor's dtype before computing.
pub(super) fn f32_scalar(s: Scalar) -> Option<f32> {
    Some(s.to_f64() as f32)
}

/// An integer scalar next to an i64 tensor; a floating one would promote, so refuse it.
pub(super) fn i64_scalar(s: Scalar) -> Option<i64> {
    (!s.is_floating()).then(|| s.to_i64())
}

/// Drops size-1 dims and merges each dim into its outer neighbour when every stride list
/// continues linearly across both (a broadcast stride 0 continues as 0).
fn coalesce<const N: usize>(sizes: &[usize], strides: [&[usize]; N]) -> (Vec<usize>, [Vec<usize>; N]) {
    let mut dims: Vec<usize> = Vec::new();
    let mut st: [Vec<usize>; N] = core::array::from_fn(|_| Vec::new());
    for (d, &n) in sizes.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let linear = !dims.is_empty() && (0..N).all(|k| st[k].last() == Some(&(strides[k][d] * n)));
        if linear {
            let last = dims.len() - 1;
            dims[last] *= n;
            for k in 0..N {
                st[k][last] = strides[k][d];
            }
        } else {
            dims.push(n);
            for k in 0..N {
                st[k].push(strides[k][d]);
            }
        }
    }
    (dims, st)
}

/// `o = f(a, b)` over broadcast inputs, one coalesced innermost row at a time, so bias adds,
/// per-row scales and scalar operands all become plain slice loops the compiler vectorizes.
pub(super) fn broadcast_rows<A: Copy, B: Copy, O>(
    sizes: &[usize],
    sa: &[usize],
    sb: &[usize],
    a: &[A],
    b: &[B],
    o: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    let (dims, [sa, sb]) = coalesce(sizes, [sa, sb]);
    let outer = dims.len().saturating_sub(1);
    let n = dims.last().copied().unwrap_or(1);
    let (ia, ib) = (sa.get(outer).copied().unwrap_or(0), sb.get(outer).copied().unwrap_or(0));
    for_each_broadcast(&dims[..outer], [&sa[..outer], &sb[..outer]], |r, [oa, ob]| {
        let row = &mut o[r * n..(r + 1) * n];
        match (ia, ib) {
            (1, 1) => {
                for ((y, &x1), &x2) in row.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                    *y = f(x1, x2);
                }
            }
            (1, 0) => {
                let x2 = b[ob];
                for (y, &x1) in row.iter_mut().zip(&a[oa..oa + n]) {
                    *y = f(x1, x2);
                }
            }
            (0, 1) => {
                let x1 = a[oa];
                for (y, &x2) in row.iter_mut().zip(&b[ob..ob + n]) {
                    *y = f(x1, x2);
                }
            }
            _ => {
                for (k, y) in row.iter_mut().enumerate() {
                    *y = f(a[oa + k * ia], b[ob + k * ib]);
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Arithmetic.

/// One arithmetic op in f64 (floating out), i64 (integer/bool out; None = division by zero)
/// and f32 (all-f32 fast path) forms.
#[allow(clippy::too_many_arguments)]
pub(super) fn arith(
    args: &KernelArgs<'_>,
    a: Operand<'_>,
    b: Operand<'_>,
    out: usize,
    name: &str,
    ff: impl Fn(f64, f64) -> f64,
    fi: impl Fn(i64, i64) -> Option<i64>,
    f32f: impl Fn(f32, f32) -> f32,
) -> KernelResult {
    let mut to = args.out(out)?;
    let (sizes, st) = broadcast_plan(&[a, b], &to)?;
    to.resize(&sizes)?;
    if to.dtype == ScalarType::Float {
        let (mut ca, mut cb) = ([0f32], [0f32]);
        if let (Some(xa), Some(xb)) = (view(a, &mut ca, f32_scalar), view(b, &mut cb, f32_scalar)) {
            broadcast_rows(&sizes, &st[0], &st[1], xa, xb, to.data_mut::<f32>()?, f32f);
            return Ok(());
        }
    }
    let (ea, eb) = (a.src(b.dtype())?, b.src(a.dtype())?);
    let out_dtype = to.dtype;
    let mut eo = ElemsMut::of(&mut to)?;
    if eo.is_floating() {
        for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| eo.set_f64(o, ff(ea.f64(i), eb.f64(j))));
        return Ok(());
    }
    if a.is_floating() || b.is_floating() {
        return Err(kerr!("{name}: a floating input cannot produce a {out_dtype} out"));
    }
    let mut div_by_zero = false;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| match fi(ea.i64(i), eb.i64(j)) {
        Some(v) => eo.set_i64(o, v),
        None => div_by_zero = true,
    });
    if div_by_zero {
        return Err(kerr!("{name}: integer division by zero"));
    }
    Ok(())
}

/// `self + alpha * other` (or `self - alpha * other` when `negate`); out at args[3].
fn add_sub(args: &KernelArgs<'_>, other: Operand<'_>, negate: bool, name: &str) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    let alpha = args.scalar(2)?;
    let out_dtype = out_dtype(args, 3)?;
    if alpha.is_floating() && !out_dtype.is_floating() {
        return Err(kerr!("{name}: floating alpha {alpha:?} with a {out_dtype} out"));
    }
    if negate && a.is_bool() && other.is_bool() {
        return Err(kerr!("{name}: subtraction of bool tensors is not supported"));
    }
    let (af, ai) =
        if negate { (-alpha.to_f64(), alpha.to_i64().wrapping_neg()) } else { (alpha.to_f64(), alpha.to_i64()) };
    let af32 = af as f32;
    arith(
        args,
        a,
        other,
        3,
        name,
        |x, y| x + af * y,
        |x, y| Some(x.wrapping_add(ai.wrapping_mul(y))),
        |x, y| x + af32 * y,
    )
}

/// `add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`: [self, other, alpha, out, out].
pub fn add_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if cfg!(feature = "complex") && any_complex(args, &[0, 1, 3])? {
        return complex_arith::binary(args, 0, 1, 3, BinaryOp::Add(args.scalar(2)?.to_f64()), "add.out");
    }
    add_sub(args, Operand::tensor(args, 1)?, false, "add.out")
}

/// `add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)`.
pub fn add_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    add_sub(args, Operand::scalar(args, 1)?, false, "add.Scalar_out")
}

/// `sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`.
pub fn sub_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    add_sub(args, Operand::tensor(args, 1)?, true, "sub.out")
}

/// `sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)`.
pub fn sub_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    add_sub(args, Operand::scalar(args, 1)?, true, "sub.Scalar_out")
}

fn mul(args: &KernelArgs<'_>, other: Operand<'_>, name: &str) -> KernelResult {
    arith(args, Operand::tensor(args, 0)?, other, 2, name, |x, y| x * y, |x, y| Some(x.wrapping_mul(y)), |x, y| x * y)
}

/// `mul.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn mul_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if cfg!(feature = "complex") && any_complex(args, &[0, 1, 2])? {
        return complex_arith::binary(args, 0, 1, 2, BinaryOp::Mul, "mul.out");
    }
    mul(args, Operand::tensor(args, 1)?, "mul.out")
}

/// `mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn mul_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    mul(args, Operand::scalar(args, 1)?, "mul.Scalar_out")
}

/// Python/PyTorch floor division of floats, derived from fmod so that the quotient is exact
/// where `floor(a / b)` would round up (e.g. `1 // 0.1 == 9`).
pub(super) fn floor_div_f64(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = libm::fmod(a, b);
    let mut d = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        d -= 1.0;
    }
    if d == 0.0 {
        return libm::copysign(0.0, a / b);
    }
    let fl = libm::floor(d);
    if d - fl > 0.5 {
        fl + 1.0
    } else {
        fl
    }
}

/// Integer floor division (rounds toward -inf, as Python); None on division by zero.
pub(super) fn floor_div_i64(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.wrapping_div(b);
    Some(if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q })
}

/// `div` with an optional rounding mode ("trunc", "floor"; None = true division); out at `out`.
pub(super) fn div(
    args: &KernelArgs<'_>,
    other: Operand<'_>,
    mode: Option<&str>,
    out: usize,
    name: &str,
) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    match mode {
        None => {
            // True division: integer inputs give a floating result, so the out must be floating.
            let out_dtype = out_dtype(args, out)?;
            if !out_dtype.is_floating() {
                return Err(kerr!("{name}: true division needs a floating out, got {out_dtype}"));
            }
            arith(args, a, other, out, name, |x, y| x / y, |_, _| None, |x, y| x / y)
        }
        Some("trunc") => arith(
            args,
            a,
            other,
            out,
            name,
            |x, y| libm::trunc(x / y),
            |x, y| if y == 0 { None } else { Some(x.wrapping_div(y)) },
            |x, y| libm::truncf(x / y),
        ),
        Some("floor") => arith(args, a, other, out, name, floor_div_f64, floor_div_i64, |x, y| {
            floor_div_f64(x as f64, y as f64) as f32
        }),
        Some(m) => Err(kerr!("{name}: unknown rounding_mode {m:?} (expected \"trunc\", \"floor\" or None)")),
    }
}

/// The dtype of output argument `i`, read without borrowing its memory (an out may be borrowed
/// mutably only once per call).
pub(super) fn out_dtype(args: &KernelArgs<'_>, i: usize) -> KernelResult<ScalarType> {
    match args.value(i)? {
        Value::Tensor(t) => Ok(t.dtype),
        v => Err(kerr!("argument {i}: expected an out Tensor, found {}", v.kind())),
    }
}

/// Whether any of the tensor arguments `ids` is complex (read without borrowing an out).
fn any_complex(args: &KernelArgs<'_>, ids: &[usize]) -> KernelResult<bool> {
    for &i in ids {
        if complex_arith::is_complex(out_dtype(args, i)?) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn opt_string<'a>(args: &KernelArgs<'a>, i: usize) -> KernelResult<Option<&'a str>> {
    if args.is_none(i)? {
        Ok(None)
    } else {
        args.string(i).map(Some)
    }
}

/// `div.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn div_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if cfg!(feature = "complex") && any_complex(args, &[0, 1, 2])? {
        return complex_arith::binary(args, 0, 1, 2, BinaryOp::Div, "div.out");
    }
    div(args, Operand::tensor(args, 1)?, None, 2, "div.out")
}

/// `div.out_mode(Tensor self, Tensor other, *, str? rounding_mode, Tensor(a!) out)`.
pub fn div_out_mode(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    div(args, Operand::tensor(args, 1)?, opt_string(args, 2)?, 3, "div.out_mode")
}

/// `div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn div_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    div(args, Operand::scalar(args, 1)?, None, 2, "div.Scalar_out")
}

/// `div.Scalar_mode_out(Tensor self, Scalar other, *, str? rounding_mode, Tensor(a!) out)`.
pub fn div_scalar_mode_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    div(args, Operand::scalar(args, 1)?, opt_string(args, 2)?, 3, "div.Scalar_mode_out")
}

/// Integer power by squaring (wrapping); negative exponents give 1/base truncated, as PyTorch.
fn pow_i64(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut acc, mut b, mut e) = (1i64, base, exp as u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    acc
}

/// f32 power with the common exponents (squares in norms, square roots) done exactly.
fn pow_f32(x: f32, e: f32) -> f32 {
    if e == 2.0 {
        x * x
    } else if e == 0.5 {
        libm::sqrtf(x)
    } else if e == 1.0 {
        x
    } else {
        libm::powf(x, e)
    }
}

fn pow(args: &KernelArgs<'_>, a: Operand<'_>, b: Operand<'_>, name: &str) -> KernelResult {
    arith(args, a, b, 2, name, libm::pow, |x, y| Some(pow_i64(x, y)), pow_f32)
}

/// `pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out)`.
pub fn pow_tensor_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pow(args, Operand::tensor(args, 0)?, Operand::tensor(args, 1)?, "pow.Tensor_Tensor_out")
}

/// `pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out)`.
pub fn pow_tensor_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pow(args, Operand::tensor(args, 0)?, Operand::scalar(args, 1)?, "pow.Tensor_Scalar_out")
}

/// `pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out)`.
pub fn pow_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pow(args, Operand::scalar(args, 0)?, Operand::tensor(args, 1)?, "pow.Scalar_out")
}

/// NaN-propagating max/min (PyTorch's maximum/minimum), for f64 and f32.
macro_rules! nan_extremum {
    ($name:ident, $t:ty, $pick_a:tt) => {
        fn $name(x: $t, y: $t) -> $t {
            if x.is_nan() || y.is_nan() {
                <$t>::NAN
            } else if x $pick_a y {
                x
            } else {
                y
            }
        }
    };
}
nan_extremum!(max_f64, f64, >=);
nan_extremum!(max_f32, f32, >=);
nan_extremum!(min_f64, f64, <=);
nan_extremum!(min_f32, f32, <=);

/// `maximum.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn maximum_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (a, b) = (Operand::tensor(args, 0)?, Operand::tensor(args, 1)?);
    arith(args, a, b, 2, "maximum.out", max_f64, |x, y| Some(x.max(y)), max_f32)
}

/// `minimum.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn minimum_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (a, b) = (Operand::tensor(args, 0)?, Operand::tensor(args, 1)?);
    arith(args, a, b, 2, "minimum.out", min_f64, |x, y| Some(x.min(y)), min_f32)
}

// ---------------------------------------------------------------------------------------------
// where.

/// Same-dtype select on raw elements of width `T` (so one loop serves every dtype); false if
/// the bytes cannot be viewed as `T` (then the caller takes the converting path).
fn select_raw<T: bytemuck::Pod>(
    sizes: &[usize],
    st: &[Vec<usize>],
    c: &[u8],
    x: &[u8],
    y: &[u8],
    o: &mut [u8],
) -> bool {
    let (Ok(x), Ok(y), Ok(o)) = (
        bytemuck::try_cast_slice::<u8, T>(x),
        bytemuck::try_cast_slice::<u8, T>(y),
        bytemuck::try_cast_slice_mut::<u8, T>(o),
    ) else {
        return false;
    };
    for_each_broadcast(sizes, [&st[0], &st[1], &st[2]], |k, [i, j, l]| o[k] = if c[i] != 0 { x[j] } else { y[l] });
    true
}

/// `where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out)`:
/// [condition, self, other, out, out]; all three inputs broadcast together.
pub fn where_self_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (c, x, y) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    if !matches!(c.dtype, ScalarType::Bool | ScalarType::Byte) {
        return Err(kerr!("where.self_out: condition must be Bool (or Byte), got {}", c.dtype));
    }
    let mut to = args.out(3)?;
    let (sizes, st) = broadcast_plan(&[Operand::Tensor(c), Operand::Tensor(x), Operand::Tensor(y)], &to)?;
    to.resize(&sizes)?;
    let cd = c.data::<u8>()?;
    if x.dtype == to.dtype && y.dtype == to.dtype {
        let (xb, yb, size) = (x.bytes(), y.bytes(), to.dtype.size());
        let ob = to.bytes_mut();
        let done = match size {
            1 => select_raw::<u8>(&sizes, &st, cd, xb, yb, ob),
            2 => select_raw::<u16>(&sizes, &st, cd, xb, yb, ob),
            4 => select_raw::<u32>(&sizes, &st, cd, xb, yb, ob),
            8 => select_raw::<u64>(&sizes, &st, cd, xb, yb, ob),
            _ => false,
        };
        if done {
            return Ok(());
        }
    }
    let (ex, ey) = (Elems::of(&x)?, Elems::of(&y)?);
    let mut eo = ElemsMut::of(&mut to)?;
    for_each_broadcast(&sizes, [&st[0], &st[1], &st[2]], |k, [i, j, l]| {
        if cd[i] != 0 {
            eo.copy_from(k, &ex, j)
        } else {
            eo.copy_from(k, &ey, l)
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn add_broadcasts_with_alpha() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = h.f32(&[3], &[10., 20., 30.]);
        let alpha = h.int(2);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(super::add_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![21., 42., 63., 24., 45., 66.]);
    }

    #[test]
    fn add_rejects_bad_broadcast() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[0.; 6]);
        let b = h.f32(&[2], &[0.; 2]);
        let alpha = h.int(1);
        let out = h.out(ScalarType::Float, &[2, 3]);
        let e = h.call(super::add_out, &[a, b, alpha, out, out]).unwrap_err();
        assert!(e.message.contains("broadcast"), "{e}");
    }

    #[test]
    fn add_broadcasts_both_sides_f32() {
        // [3,1,2] + [1,2,1] -> [3,2,2]: both operands broadcast (the strided row path).
        let mut h = OpHarness::new();
        let a = h.f32(&[3, 1, 2], &[1., 2., 3., 4., 5., 6.]);
        let b = h.f32(&[1, 2, 1], &[10., 20.]);
        let alpha = h.int(1);
        let out = h.out(ScalarType::Float, &[3, 2, 2]);
        h.call(super::add_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![11., 12., 21., 22., 13., 14., 23., 24., 15., 16., 25., 26.]);
    }

    #[test]
    fn add_int64_alpha_and_scalar_overload() {
        let mut h = OpHarness::new();
        let a = h.i64(&[3], &[1, -2, 3]);
        let b = h.i64(&[3], &[4, 5, -6]);
        let alpha = h.int(3);
        let out = h.out(ScalarType::Long, &[3]);
        h.call(super::add_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![13, 13, -15]);

        let s = h.double(0.5);
        let alpha = h.int(2);
        let outf = h.out(ScalarType::Float, &[3]);
        h.call(super::add_scalar_out, &[a, s, alpha, outf, outf]).unwrap();
        assert_eq!(h.read::<f32>(outf), vec![2., -1., 4.]);
    }

    #[test]
    fn add_rejects_float_alpha_for_int_out() {
        let mut h = OpHarness::new();
        let a = h.i64(&[1], &[1]);
        let alpha = h.double(0.5);
        let out = h.out(ScalarType::Long, &[1]);
        let e = h.call(super::add_out, &[a, a, alpha, out, out]).unwrap_err();
        assert!(e.message.contains("alpha"), "{e}");
    }

    #[test]
    fn sub_alpha_and_int64() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 2], &[1., 2., 3., 4.]);
        let b = h.f32(&[2], &[2., 4.]);
        let alpha = h.double(0.5);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::sub_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0., 2., 2.]);

        let x = h.i64(&[2], &[5, -5]);
        let y = h.i64(&[2], &[7, 7]);
        let one = h.int(1);
        let oi = h.out(ScalarType::Long, &[2]);
        h.call(super::sub_out, &[x, y, one, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![-2, -12]);

        let s = h.int(3);
        let os = h.out(ScalarType::Long, &[2]);
        h.call(super::sub_scalar_out, &[x, s, one, os, os]).unwrap();
        assert_eq!(h.read::<i64>(os), vec![2, -8]);
    }

    #[test]
    fn sub_rejects_bool() {
        let mut h = OpHarness::new();
        let a = h.bool_tensor(&[2], &[true, false]);
        let one = h.int(1);
        let out = h.out(ScalarType::Bool, &[2]);
        assert!(h.call(super::sub_out, &[a, a, one, out, out]).is_err());
    }

    #[test]
    fn mul_broadcast_int_half_and_bool() {
        let mut h = OpHarness::new();
        // [2,1,2] * [3,1] -> [2,3,2]
        let a = h.f32(&[2, 1, 2], &[1., 2., 3., 4.]);
        let b = h.f32(&[3, 1], &[1., 10., 100.]);
        let out = h.out(ScalarType::Float, &[2, 3, 2]);
        h.call(super::mul_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 2., 10., 20., 100., 200., 3., 4., 30., 40., 300., 400.]);

        let x = h.i64(&[3], &[2, -3, 4]);
        let oi = h.out(ScalarType::Long, &[3]);
        h.call(super::mul_out, &[x, x, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![4, 9, 16]);

        let hx = h.tensor(ScalarType::Half, &[2], &[f16::from_f32(1.5), f16::from_f32(-2.0)]);
        let s = h.double(0.5);
        let oh = h.out(ScalarType::Half, &[2]);
        h.call(super::mul_scalar_out, &[hx, s, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f32(0.75), f16::from_f32(-1.0)]);

        let bx = h.bool_tensor(&[3], &[true, true, false]);
        let by = h.bool_tensor(&[3], &[true, false, false]);
        let ob = h.out(ScalarType::Bool, &[3]);
        h.call(super::mul_out, &[bx, by, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![true, false, false]);
    }

    #[test]
    fn mul_scalar_int64_and_float() {
        let mut h = OpHarness::new();
        let x = h.i64(&[3], &[1, -2, 7]);
        let s = h.int(3);
        let out = h.out(ScalarType::Long, &[3]);
        h.call(super::mul_scalar_out, &[x, s, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![3, -6, 21]);

        let f = h.f32(&[2], &[3., -5.]);
        let half = h.double(0.5);
        let of = h.out(ScalarType::Float, &[2]);
        h.call(super::mul_scalar_out, &[f, half, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![1.5, -2.5]);

        // A floating scalar cannot produce an integer out (PyTorch promotes to float).
        let oi = h.out(ScalarType::Long, &[3]);
        assert!(h.call(super::mul_scalar_out, &[x, half, oi, oi]).is_err());
    }

    #[test]
    fn div_true_trunc_floor() {
        let mut h = OpHarness::new();
        let a = h.i64(&[4], &[7, -7, 7, -7]);
        let b = h.i64(&[4], &[2, 2, -2, -2]);
        let of = h.out(ScalarType::Float, &[4]);
        h.call(super::div_out, &[a, b, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![3.5, -3.5, -3.5, 3.5]);

        let trunc = h.frame.values.len() as u32;
        h.frame.values.push(rbuild_runtime::Value::String("trunc".into()));
        let floor = h.frame.values.len() as u32;
        h.frame.values.push(rbuild_runtime::Value::String("floor".into()));
        let ot = h.out(ScalarType::Long, &[4]);
        h.call(super::div_out_mode, &[a, b, trunc, ot, ot]).unwrap();
        assert_eq!(h.read::<i64>(ot), vec![3, -3, -3, 3]);
        let ofl = h.out(ScalarType::Long, &[4]);
        h.call(super::div_out_mode, &[a, b, floor, ofl, ofl]).unwrap();
        assert_eq!(h.read::<i64>(ofl), vec![3, -4, -4, 3]);

        let fa = h.f32(&[3], &[7.5, -7.5, 1.0]);
        let fb = h.f32(&[3], &[2., 2., 0.1]);
        let off = h.out(ScalarType::Float, &[3]);
        h.call(super::div_out_mode, &[fa, fb, floor, off, off]).unwrap();
        assert_eq!(h.read::<f32>(off), vec![3., -4., 9.]);
        let none = h.none();
        let otn = h.out(ScalarType::Float, &[3]);
        h.call(super::div_out_mode, &[fa, fb, none, otn, otn]).unwrap();
        assert_eq!(h.read::<f32>(otn), vec![3.75, -3.75, 10.]);

        let six = h.int(6);
        let os = h.out(ScalarType::Float, &[4]);
        h.call(super::div_scalar_out, &[a, six, os, os]).unwrap();
        assert_eq!(h.read::<f32>(os), vec![7. / 6., -7. / 6., 7. / 6., -7. / 6.]);

        let zero = h.i64(&[4], &[1, 0, 1, 1]);
        let oz = h.out(ScalarType::Long, &[4]);
        let e = h.call(super::div_out_mode, &[a, zero, trunc, oz, oz]).unwrap_err();
        assert!(e.message.contains("division by zero"), "{e}");
        // True division into an integer out is refused.
        let e = h.call(super::div_out, &[a, b, oz, oz]).unwrap_err();
        assert!(e.message.contains("floating out"), "{e}");
    }

    #[test]
    fn floor_div_helpers_match_python() {
        assert_eq!(super::floor_div_i64(-7, 2), Some(-4));
        assert_eq!(super::floor_div_i64(7, -2), Some(-4));
        assert_eq!(super::floor_div_i64(-6, 3), Some(-2));
        assert_eq!(super::floor_div_i64(i64::MIN, -1), Some(i64::MIN));
        assert_eq!(super::floor_div_i64(1, 0), None);
        assert_eq!(super::floor_div_f64(-0.5, 1.0), -1.0);
        assert_eq!(super::floor_div_f64(5.0, -0.0), f64::NEG_INFINITY);
    }

    #[test]
    fn pow_variants() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[2., -3., 4.]);
        let three = h.int(3);
        let o = h.out(ScalarType::Float, &[3]);
        h.call(super::pow_tensor_scalar_out, &[x, three, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![8., -27., 64.]);
        let m1 = h.double(-1.0);
        h.call(super::pow_tensor_scalar_out, &[x, m1, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![0.5, -1. / 3., 0.25]);
        let half = h.double(0.5);
        h.call(super::pow_tensor_scalar_out, &[x, half, o, o]).unwrap();
        let r = h.read::<f32>(o);
        assert!((r[0] - core::f32::consts::SQRT_2).abs() < 1e-6 && r[1].is_nan() && r[2] == 2.0);

        let xi = h.i64(&[4], &[2, -3, 1, 5]);
        let ei = h.i64(&[4], &[10, 3, -2, 0]);
        let oi = h.out(ScalarType::Long, &[4]);
        h.call(super::pow_tensor_tensor_out, &[xi, ei, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1024, -27, 1, 1]);

        let two = h.double(2.0);
        let of = h.out(ScalarType::Float, &[4]);
        h.call(super::pow_scalar_out, &[two, xi, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![4., 0.125, 2., 32.]);
    }

    #[test]
    fn maximum_minimum_propagate_nan() {
        let mut h = OpHarness::new();
        let a = h.f32(&[3], &[1., f32::NAN, -2.]);
        let b = h.f32(&[3], &[0., 5., 3.]);
        let o = h.out(ScalarType::Float, &[3]);
        h.call(super::maximum_out, &[a, b, o, o]).unwrap();
        let r = h.read::<f32>(o);
        assert!(r[0] == 1. && r[1].is_nan() && r[2] == 3.);
        h.call(super::minimum_out, &[a, b, o, o]).unwrap();
        let r = h.read::<f32>(o);
        assert!(r[0] == 0. && r[1].is_nan() && r[2] == -2.);

        let x = h.tensor(ScalarType::Int, &[2, 1], &[1i32, 7]);
        let y = h.tensor(ScalarType::Int, &[2], &[3i32, 5]);
        let oi = h.out(ScalarType::Int, &[2, 2]);
        h.call(super::maximum_out, &[x, y, oi, oi]).unwrap();
        assert_eq!(h.read::<i32>(oi), vec![3, 5, 7, 7]);
    }

    #[test]
    fn where_broadcast3_int64_and_mixed() {
        let mut h = OpHarness::new();
        let c = h.bool_tensor(&[3, 1], &[true, false, true]);
        let x = h.f32(&[1, 4], &[1., 2., 3., 4.]);
        let y = h.f32(&[3, 4], &(10..22).map(|v| v as f32).collect::<Vec<_>>());
        let o = h.out(ScalarType::Float, &[3, 4]);
        h.call(super::where_self_out, &[c, x, y, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1., 2., 3., 4., 14., 15., 16., 17., 1., 2., 3., 4.]);

        let c2 = h.bool_tensor(&[2], &[false, true]);
        let a = h.i64(&[2], &[1, 2]);
        let b = h.i64(&[2], &[-1, -2]);
        let oi = h.out(ScalarType::Long, &[2]);
        h.call(super::where_self_out, &[c2, a, b, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![-1, 2]);

        // Mixed dtypes convert into the out dtype.
        let s = h.tensor(ScalarType::Double, &[], &[f64::NEG_INFINITY]);
        let of = h.out(ScalarType::Float, &[2]);
        h.call(super::where_self_out, &[c2, s, a, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![1., f32::NEG_INFINITY]);

        let bad = h.f32(&[2], &[1., 0.]);
        assert!(h.call(super::where_self_out, &[bad, a, b, oi, oi]).is_err());
    }

    #[test]
    fn empty_tensors() {
        let mut h = OpHarness::new();
        let a = h.f32(&[0, 3], &[]);
        let b = h.f32(&[3], &[1., 2., 3.]);
        let o = h.out(ScalarType::Float, &[0, 3]);
        h.call(super::mul_out, &[a, b, o, o]).unwrap();
        let c = h.bool_tensor(&[0, 1], &[]);
        h.call(super::where_self_out, &[c, a, b, o, o]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 3]);
    }

    #[test]
    fn dynamic_out_resizes_to_broadcast_shape() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 1], &[1., 2.]);
        let b = h.f32(&[3], &[1., 2., 3.]);
        let o = h.out_dynamic(ScalarType::Float, &[4, 4]);
        h.call(super::mul_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.sizes(o), vec![2, 3]);
        assert_eq!(h.read::<f32>(o), vec![1., 2., 3., 2., 4., 6.]);
    }
}
