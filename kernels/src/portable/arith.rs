//! Elementwise arithmetic on two operands beyond binary.rs's core set: `atan2`, `fmod`,
//! `remainder`, `floor_divide`, the bit shifts and `rsub`, with PyTorch's broadcasting, type
//! promotion and integer semantics (Python-style remainder, ZeroDivisionError as an error, shift
//! amounts past the bit width).
//!
//! Everything but the shifts runs on binary.rs's `arith` (f32 fast path, f64 for other floating
//! outs, i64 for integer outs); the shifts compute in the promoted integer dtype's width.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, Scalar, ScalarType};

use super::binary::{arith, broadcast_plan, div, out_dtype, Operand};
use super::util::{for_each_broadcast, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::atan2.out" => atan2_out,
    "aten::fmod.Tensor_out" => fmod_tensor_out,
    "aten::fmod.Scalar_out" => fmod_scalar_out,
    "aten::remainder.Tensor_out" => remainder_tensor_out,
    "aten::remainder.Scalar_out" => remainder_scalar_out,
    "aten::floor_divide.out" => floor_divide_out,
    "aten::bitwise_left_shift.Tensor_out" => bitwise_left_shift_tensor_out,
    "aten::bitwise_left_shift.Tensor_Scalar_out" => bitwise_left_shift_tensor_scalar_out,
    "aten::bitwise_right_shift.Tensor_out" => bitwise_right_shift_tensor_out,
    "aten::bitwise_right_shift.Tensor_Scalar_out" => bitwise_right_shift_tensor_scalar_out,
    "aten::rsub.Scalar_out" => rsub_scalar_out,
}

// ---------------------------------------------------------------------------------------------
// PyTorch's result dtype.

/// The dtype both of `a` and `b` promote to (`torch.promote_types`); None where PyTorch has
/// no promotion (the unsigned types past Byte next to another integer type).
fn promote_types(a: ScalarType, b: ScalarType) -> Option<ScalarType> {
    use ScalarType::*;
    let int_rank = |t| [Bool, Byte, Char, Short, Int, Long].iter().position(|&x| x == t);
    Some(match (a, b) {
        _ if a == b => a,
        (Bool, t) | (t, Bool) => t,
        (Half, BFloat16) | (BFloat16, Half) => Float,
        (x, y) if x.is_floating() && y.is_floating() => {
            let float_rank = |t| [Half, BFloat16, Float, Double].iter().position(|&f| f == t);
            if float_rank(x) > float_rank(y) {
                x
            } else {
                y
            }
        }
        (f, _) | (_, f) if f.is_floating() => f,
        // Byte and a signed type: the smallest signed type holding both ranges.
        (Byte, Char) | (Char, Byte) => Short,
        (x, y) => match (int_rank(x), int_rank(y)) {
            (Some(rx), Some(ry)) => {
                if rx > ry {
                    x
                } else {
                    y
                }
            }
            _ => return None,
        },
    })
}

/// Joins a higher-priority group's dtype with a lower one's (PyTorch's `combine_categories`):
/// the lower group only matters when it is of a higher category (bool < integer < floating).
fn combine_categories(higher: Option<ScalarType>, lower: Option<ScalarType>) -> Option<ScalarType> {
    match (higher, lower) {
        (Some(h), Some(l)) if !h.is_floating() && (h == ScalarType::Bool || l.is_floating()) => promote_types(h, l),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// PyTorch's result dtype of elementwise operands: tensors with dims outrank 0-dim tensors,
/// which outrank Scalars (an Int Scalar counts as Long, a Double one as the default Float).
pub(super) fn result_type(ops: &[Operand<'_>]) -> KernelResult<ScalarType> {
    let (mut dims, mut zero_dim, mut scalars) = (None, None, None);
    for op in ops {
        let (slot, dtype) = match op {
            Operand::Tensor(t) if t.dim() > 0 => (&mut dims, t.dtype),
            Operand::Tensor(t) => (&mut zero_dim, t.dtype),
            Operand::Scalar(Scalar::Bool(_)) => (&mut scalars, ScalarType::Bool),
            Operand::Scalar(Scalar::Int(_)) => (&mut scalars, ScalarType::Long),
            Operand::Scalar(Scalar::Double(_)) => (&mut scalars, ScalarType::Float),
        };
        *slot = match *slot {
            None => Some(dtype),
            Some(prev) => Some(
                promote_types(prev, dtype).ok_or_else(|| kerr!("dtypes {prev} and {dtype} have no common dtype"))?,
            ),
        };
    }
    combine_categories(dims, combine_categories(zero_dim, scalars))
        .ok_or_else(|| kerr!("operands have no common dtype"))
}

/// PyTorch implements these ops for integer and floating dtypes, not for a Bool result.
fn reject_bool(name: &str, a: Operand<'_>, b: Operand<'_>) -> KernelResult {
    if result_type(&[a, b])? == ScalarType::Bool {
        return Err(kerr!("{name}: not implemented for Bool operands"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// atan2, fmod, remainder, floor_divide.

/// `atan2.out(Tensor self, Tensor other, *, Tensor(a!) out)`: integer inputs give a float out.
pub fn atan2_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let out = out_dtype(args, 2)?;
    if !out.is_floating() {
        return Err(kerr!("atan2.out: needs a floating out, got {out}"));
    }
    let (a, b) = (Operand::tensor(args, 0)?, Operand::tensor(args, 1)?);
    arith(args, a, b, 2, "atan2.out", libm::atan2, |_, _| None, libm::atan2f)
}

/// C's `fmod` (the result has the dividend's sign); integer division by zero is an error.
fn fmod(args: &KernelArgs<'_>, other: Operand<'_>, name: &str) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    reject_bool(name, a, other)?;
    let fi = |x: i64, y: i64| if y == 0 { None } else { Some(x.wrapping_rem(y)) };
    arith(args, a, other, 2, name, libm::fmod, fi, libm::fmodf)
}

/// `fmod.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn fmod_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    fmod(args, Operand::tensor(args, 1)?, "fmod.Tensor_out")
}

/// `fmod.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn fmod_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    fmod(args, Operand::scalar(args, 1)?, "fmod.Scalar_out")
}

/// Python's `%` on floats: fmod, moved into the divisor's sign.
fn remainder_f64(a: f64, b: f64) -> f64 {
    let m = libm::fmod(a, b);
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m + b
    } else {
        m
    }
}

fn remainder_f32(a: f32, b: f32) -> f32 {
    let m = libm::fmodf(a, b);
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m + b
    } else {
        m
    }
}

/// Python's `%` on integers (the result has the divisor's sign); None on division by zero.
fn remainder_i64(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let r = a.wrapping_rem(b);
    Some(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

fn remainder(args: &KernelArgs<'_>, other: Operand<'_>, name: &str) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    reject_bool(name, a, other)?;
    arith(args, a, other, 2, name, remainder_f64, remainder_i64, remainder_f32)
}

/// `remainder.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn remainder_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    remainder(args, Operand::tensor(args, 1)?, "remainder.Tensor_out")
}

/// `remainder.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn remainder_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    remainder(args, Operand::scalar(args, 1)?, "remainder.Scalar_out")
}

/// `floor_divide.out(Tensor self, Tensor other, *, Tensor(a!) out)`: `div` with rounding_mode
/// "floor".
pub fn floor_divide_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (a, b) = (Operand::tensor(args, 0)?, Operand::tensor(args, 1)?);
    reject_bool("floor_divide.out", a, b)?;
    div(args, b, Some("floor"), 2, "floor_divide.out")
}

// ---------------------------------------------------------------------------------------------
// Bit shifts.

/// `v` wrapped into the integer dtype `dtype`, sign- or zero-extended back to i64.
fn wrap_to(dtype: ScalarType, v: i64) -> i64 {
    match dtype {
        ScalarType::Byte => v as u8 as i64,
        ScalarType::Char => v as i8 as i64,
        ScalarType::Short => v as i16 as i64,
        ScalarType::Int => v as i32 as i64,
        _ => v,
    }
}

/// `a << b` in `dtype`: shifting by a negative amount or by the bit width or more gives 0.
fn shift_left(dtype: ScalarType, a: i64, b: i64) -> i64 {
    let bits = 8 * dtype.size() as i64;
    if b < 0 || b >= bits {
        0
    } else {
        wrap_to(dtype, ((a as u64) << b) as i64)
    }
}

/// `a >> b` in `dtype` (arithmetic for signed types): a negative amount or one past the
/// value bits leaves only the sign (-1 or 0).
fn shift_right(dtype: ScalarType, a: i64, b: i64) -> i64 {
    let signed = dtype != ScalarType::Byte;
    let max_shift = 8 * dtype.size() as i64 - signed as i64;
    if b < 0 || b >= max_shift {
        if signed && a < 0 {
            -1
        } else {
            0
        }
    } else {
        a >> b
    }
}

/// A shift of integer operands computed in their promoted dtype, as PyTorch: both operands are
/// first wrapped into it (a Scalar shift amount too), and the result wraps at its width.
fn shift(args: &KernelArgs<'_>, b: Operand<'_>, name: &str, f: fn(ScalarType, i64, i64) -> i64) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    let dtype = result_type(&[a, b])?;
    if !matches!(dtype, ScalarType::Byte | ScalarType::Char | ScalarType::Short | ScalarType::Int | ScalarType::Long) {
        return Err(kerr!(
            "{name}: needs integer operands, got {:?} and {:?} (promoting to {dtype})",
            a.dtype(),
            b.dtype()
        ));
    }
    let mut to = args.out(2)?;
    let (sizes, st) = broadcast_plan(&[a, b], &to)?;
    to.resize(&sizes)?;
    let (ea, eb) = (a.src(None)?, b.src(None)?);
    let mut eo = ElemsMut::of(&mut to)?;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| {
        eo.set_i64(o, f(dtype, wrap_to(dtype, ea.i64(i)), wrap_to(dtype, eb.i64(j))))
    });
    Ok(())
}

/// `bitwise_left_shift.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn bitwise_left_shift_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    shift(args, Operand::tensor(args, 1)?, "bitwise_left_shift.Tensor_out", shift_left)
}

/// `bitwise_left_shift.Tensor_Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn bitwise_left_shift_tensor_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    shift(args, Operand::scalar(args, 1)?, "bitwise_left_shift.Tensor_Scalar_out", shift_left)
}

/// `bitwise_right_shift.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn bitwise_right_shift_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    shift(args, Operand::tensor(args, 1)?, "bitwise_right_shift.Tensor_out", shift_right)
}

/// `bitwise_right_shift.Tensor_Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn bitwise_right_shift_tensor_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    shift(args, Operand::scalar(args, 1)?, "bitwise_right_shift.Tensor_Scalar_out", shift_right)
}

// ---------------------------------------------------------------------------------------------
// rsub.

/// `rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)`:
/// `other - alpha * self`.
pub fn rsub_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const NAME: &str = "rsub.Scalar_out";
    let (x, other) = (Operand::tensor(args, 0)?, Operand::scalar(args, 1)?);
    let alpha = args.scalar(2)?;
    let out = out_dtype(args, 3)?;
    if alpha.is_floating() && !out.is_floating() {
        return Err(kerr!("{NAME}: floating alpha {alpha:?} with a {out} out"));
    }
    if x.is_bool() && other.is_bool() {
        return Err(kerr!("{NAME}: subtraction of bool operands is not supported"));
    }
    let (af, ai) = (alpha.to_f64(), alpha.to_i64());
    let af32 = af as f32;
    arith(
        args,
        other,
        x,
        3,
        NAME,
        |s, v| s - af * v,
        |s, v| Some(s.wrapping_sub(ai.wrapping_mul(v))),
        |s, v| s - af32 * v,
    )
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
    use rbuild_runtime::{kerr, ScalarType, Value};

    use super::Operand;

    /// Test kernel: args [a, b, expected dtype]; fails unless `result_type(a, b)` is expected.
    fn expect_result_type(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let operand = |i| match args.value(i)? {
            Value::Tensor(_) => Operand::tensor(args, i),
            _ => Operand::scalar(args, i),
        };
        let (got, want) = (super::result_type(&[operand(0)?, operand(1)?])?, args.scalar_type(2)?);
        if got == want {
            Ok(())
        } else {
            Err(kerr!("result type {got}, expected {want}"))
        }
    }

    #[test]
    fn result_type_follows_pytorch() {
        use ScalarType::*;
        let mut h = OpHarness::new();
        let (b1, u1, c1, i1) = (
            h.bool_tensor(&[1], &[true]),
            h.tensor(Byte, &[1], &[1u8]),
            h.tensor(Char, &[1], &[1i8]),
            h.tensor(Int, &[1], &[1i32]),
        );
        let (l0, h1, d0) = (h.i64(&[], &[1]), h.tensor(Half, &[1], &[f16::ONE]), h.tensor(Double, &[], &[1.0f64]));
        let (int, double, boolean) = (h.int(300), h.double(0.5), h.bool(true));
        let cases = [
            (u1, c1, Short),
            (b1, c1, Char),
            (c1, i1, Int),
            // A 0-dim Long does not widen an Int tensor; a 0-dim Double does make it floating.
            (i1, l0, Int),
            (i1, d0, Double),
            (h1, d0, Half),
            // Scalars: an Int keeps the tensor's integer dtype, a Double gives the default
            // Float, an Int next to Bool gives Long.
            (u1, int, Byte),
            (i1, double, Float),
            (b1, int, Long),
            (b1, boolean, Bool),
            (h1, double, Half),
        ];
        for (a, b, want) in cases {
            let w = h.scalar_type(want);
            h.call(expect_result_type, &[a, b, w]).unwrap();
        }
        assert_eq!(super::promote_types(Half, BFloat16), Some(Float));
        assert_eq!(super::promote_types(UInt16, Int), None);
    }

    #[test]
    fn atan2_float_and_promoted_int() {
        let mut h = OpHarness::new();
        let y = h.f32(&[2, 2], &[1.0, -1.0, 0.0, -0.0]);
        let x = h.f32(&[2], &[-1.0, 1.0]);
        let o = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::atan2_out, &[y, x, o, o]).unwrap();
        let want = [1f32.atan2(-1.0), (-1f32).atan2(1.0), 0f32.atan2(-1.0), (-0f32).atan2(1.0)];
        assert_eq!(h.read::<f32>(o), want.to_vec());
        let yi = h.i64(&[2], &[1, -3]);
        let xi = h.tensor(ScalarType::Int, &[1], &[2i32]);
        let of = h.out(ScalarType::Float, &[2]);
        h.call(super::atan2_out, &[yi, xi, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![0.5f64.atan() as f32, (-1.5f64).atan() as f32]);
        let oi = h.out(ScalarType::Long, &[2]);
        assert!(h.call(super::atan2_out, &[yi, xi, oi, oi]).is_err());
    }

    #[test]
    fn fmod_takes_the_dividend_sign() {
        let mut h = OpHarness::new();
        let a = h.f32(&[4], &[5.5, -5.5, 5.5, -5.5]);
        let b = h.f32(&[4], &[2.0, 2.0, -2.0, 0.0]);
        let o = h.out(ScalarType::Float, &[4]);
        h.call(super::fmod_tensor_out, &[a, b, o, o]).unwrap();
        let r = h.read::<f32>(o);
        assert_eq!(&r[..3], &[1.5, -1.5, 1.5]);
        assert!(r[3].is_nan());

        let x = h.i64(&[4], &[7, -7, 7, -7]);
        let y = h.i64(&[4], &[3, 3, -3, -3]);
        let oi = h.out(ScalarType::Long, &[4]);
        h.call(super::fmod_tensor_out, &[x, y, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1, -1, 1, -1]);
        let three = h.int(3);
        h.call(super::fmod_scalar_out, &[x, three, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1, -1, 1, -1]);
        // A float Scalar promotes an integer tensor to Float.
        let half = h.double(2.5);
        let of = h.out(ScalarType::Float, &[4]);
        h.call(super::fmod_scalar_out, &[x, half, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![2.0, -2.0, 2.0, -2.0]);
        assert!(h.call(super::fmod_scalar_out, &[x, half, oi, oi]).is_err());
        // Integer division by zero is PyTorch's ZeroDivisionError.
        let zero = h.int(0);
        let e = h.call(super::fmod_scalar_out, &[x, zero, oi, oi]).unwrap_err();
        assert!(e.message.contains("division by zero"), "{e}");
        let bt = h.bool_tensor(&[1], &[true]);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::fmod_tensor_out, &[bt, bt, ob, ob]).is_err());
    }

    #[test]
    fn remainder_takes_the_divisor_sign() {
        let mut h = OpHarness::new();
        let a = h.f32(&[5], &[5.5, -5.5, 5.5, -5.5, 4.0]);
        let b = h.f32(&[5], &[2.0, 2.0, -2.0, -2.0, -2.0]);
        let o = h.out(ScalarType::Float, &[5]);
        h.call(super::remainder_tensor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.5, 0.5, -0.5, -1.5, 0.0]);

        let x = h.i64(&[5], &[7, -7, 7, -7, i64::MIN]);
        let y = h.i64(&[5], &[3, 3, -3, -3, -1]);
        let oi = h.out(ScalarType::Long, &[5]);
        h.call(super::remainder_tensor_out, &[x, y, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1, 2, -2, -1, 0]);
        let m5 = h.int(-5);
        h.call(super::remainder_scalar_out, &[x, m5, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![-3, -2, -3, -2, -3]);
        // Narrow integer types.
        let c = h.tensor(ScalarType::Char, &[3], &[-128i8, 127, -1]);
        let oc = h.out(ScalarType::Char, &[3]);
        let seven = h.int(7);
        h.call(super::remainder_scalar_out, &[c, seven, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![5, 1, 6]);
        // Float scalar with an int tensor: Float out.
        let fs = h.double(-2.5);
        let of = h.out(ScalarType::Float, &[5]);
        h.call(super::remainder_scalar_out, &[x, fs, of, of]).unwrap();
        assert_eq!(&h.read::<f32>(of)[..4], &[-0.5, -2.0, -0.5, -2.0]);
        let zero = h.i64(&[1], &[0]);
        let e = h.call(super::remainder_tensor_out, &[x, zero, oi, oi]).unwrap_err();
        assert!(e.message.contains("division by zero"), "{e}");
        let bt = h.bool_tensor(&[1], &[true]);
        let tb = h.bool(true);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::remainder_scalar_out, &[bt, tb, ob, ob]).is_err());
    }

    #[test]
    fn floor_divide_rounds_down() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 2], &[7, -7, 6, -1]);
        let y = h.i64(&[2], &[2, -2]);
        let oi = h.out(ScalarType::Long, &[2, 2]);
        h.call(super::floor_divide_out, &[x, y, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![3, 3, 3, 0]);
        let a = h.f32(&[3], &[7.5, -7.5, 1.0]);
        let b = h.f32(&[3], &[2.0, 2.0, 0.1]);
        let of = h.out(ScalarType::Float, &[3]);
        h.call(super::floor_divide_out, &[a, b, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![3.0, -4.0, 9.0]);
        let zero = h.i64(&[1], &[0]);
        assert!(h.call(super::floor_divide_out, &[x, zero, oi, oi]).is_err());
        let bt = h.bool_tensor(&[1], &[true]);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::floor_divide_out, &[bt, bt, ob, ob]).is_err());
    }

    #[test]
    fn shifts_follow_pytorch_past_the_width() {
        let mut h = OpHarness::new();
        let x = h.i64(&[6], &[1, -8, 3, -8, 5, 1]);
        let s = h.i64(&[6], &[3, 1, 64, 100, -1, 63]);
        let o = h.out(ScalarType::Long, &[6]);
        h.call(super::bitwise_left_shift_tensor_out, &[x, s, o, o]).unwrap();
        assert_eq!(h.read::<i64>(o), vec![8, -16, 0, 0, 0, i64::MIN]);
        h.call(super::bitwise_right_shift_tensor_out, &[x, s, o, o]).unwrap();
        assert_eq!(h.read::<i64>(o), vec![0, -4, 0, -1, 0, 0]);

        // int8: wraps at 8 bits; amounts >= 8 (left) or >= 7 (right) saturate.
        let c = h.tensor(ScalarType::Char, &[3], &[64i8, -3, 100]);
        let oc = h.out(ScalarType::Char, &[3]);
        let one = h.int(1);
        h.call(super::bitwise_left_shift_tensor_scalar_out, &[c, one, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![-128, -6, -56]);
        let eight = h.int(8);
        h.call(super::bitwise_left_shift_tensor_scalar_out, &[c, eight, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![0, 0, 0]);
        h.call(super::bitwise_right_shift_tensor_scalar_out, &[c, eight, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![0, -1, 0]);
        // The Scalar amount is cast to int8 first: 257 is 1.
        let big = h.int(257);
        h.call(super::bitwise_right_shift_tensor_scalar_out, &[c, big, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![32, -2, 50]);

        // uint8 wraps and zero-fills.
        let u = h.tensor(ScalarType::Byte, &[3], &[200u8, 255, 1]);
        let ou = h.out(ScalarType::Byte, &[3]);
        let two = h.int(2);
        h.call(super::bitwise_left_shift_tensor_scalar_out, &[u, two, ou, ou]).unwrap();
        assert_eq!(h.read::<u8>(ou), vec![32, 252, 4]);
        h.call(super::bitwise_right_shift_tensor_scalar_out, &[u, eight, ou, ou]).unwrap();
        assert_eq!(h.read::<u8>(ou), vec![0, 0, 0]);

        // int32 broadcast against an int64 amount: computes in int64.
        let a = h.tensor(ScalarType::Int, &[2, 1], &[1i32, -1]);
        let b = h.i64(&[3], &[0, 31, 40]);
        let ol = h.out(ScalarType::Long, &[2, 3]);
        h.call(super::bitwise_left_shift_tensor_out, &[a, b, ol, ol]).unwrap();
        assert_eq!(h.read::<i64>(ol), vec![1, 1 << 31, 1 << 40, -1, -(1 << 31), -(1 << 40)]);
    }

    #[test]
    fn shifts_reject_float_and_bool() {
        let mut h = OpHarness::new();
        let f = h.f32(&[1], &[1.0]);
        let of = h.out(ScalarType::Float, &[1]);
        let one = h.int(1);
        let e = h.call(super::bitwise_left_shift_tensor_scalar_out, &[f, one, of, of]).unwrap_err();
        assert!(e.message.contains("integer"), "{e}");
        let x = h.i64(&[1], &[1]);
        let half = h.double(0.5);
        assert!(h.call(super::bitwise_right_shift_tensor_scalar_out, &[x, half, of, of]).is_err());
        let b = h.bool_tensor(&[1], &[true]);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::bitwise_left_shift_tensor_out, &[b, b, ob, ob]).is_err());
        let bad = h.i64(&[2], &[1, 2]);
        let three = h.i64(&[3], &[1, 2, 3]);
        let ol = h.out(ScalarType::Long, &[3]);
        assert!(h.call(super::bitwise_left_shift_tensor_out, &[bad, three, ol, ol]).is_err());
    }

    #[test]
    fn rsub_scalar_minus_alpha_self() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1.0, -2.0, 0.5]);
        let (two, one) = (h.double(2.0), h.int(1));
        let o = h.out(ScalarType::Float, &[3]);
        h.call(super::rsub_scalar_out, &[x, two, one, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.0, 4.0, 1.5]);
        let xi = h.i64(&[3], &[1, -2, 5]);
        let (ten, alpha) = (h.int(10), h.int(2));
        let oi = h.out(ScalarType::Long, &[3]);
        h.call(super::rsub_scalar_out, &[xi, ten, alpha, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![8, 14, 0]);
        // Float other with an int tensor: Float out.
        let of = h.out(ScalarType::Float, &[3]);
        let frac = h.double(0.5);
        h.call(super::rsub_scalar_out, &[xi, frac, one, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![-0.5, 2.5, -4.5]);
        assert!(h.call(super::rsub_scalar_out, &[xi, ten, frac, oi, oi]).is_err());
        let b = h.bool_tensor(&[1], &[true]);
        let t = h.bool(true);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::rsub_scalar_out, &[b, t, one, ob, ob]).is_err());
        // Half keeps its dtype.
        let xh = h.tensor(ScalarType::Half, &[1], &[f16::from_f32(1.5)]);
        let oh = h.out(ScalarType::Half, &[1]);
        h.call(super::rsub_scalar_out, &[xh, one, one, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f32(-0.5)]);
    }
}
