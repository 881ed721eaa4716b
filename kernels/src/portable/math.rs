//! Elementwise math functions beyond unary.rs's core set: inverse and hyperbolic trigonometry,
//! `expm1`/`log1p`/`log2`/`log10`, `sign`, `trunc`, the `isinf`/`isnan` tests, `bitwise_not`, and
//! the parameterized activations `logit`, `elu` and `glu`.
//!
//! Float functions promote integer and bool inputs to a floating out (`acos(int)` is Float), as
//! PyTorch does; the pattern (f32 fast path, f64 for other floating outs) is unary.rs's.

use half::{bf16, f16};
use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use super::unary::{same_layout, unary};
use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::acos.out" => acos_out,
    "aten::acosh.out" => acosh_out,
    "aten::asin.out" => asin_out,
    "aten::asinh.out" => asinh_out,
    "aten::atan.out" => atan_out,
    "aten::atanh.out" => atanh_out,
    "aten::cosh.out" => cosh_out,
    "aten::sinh.out" => sinh_out,
    "aten::tan.out" => tan_out,
    "aten::expm1.out" => expm1_out,
    "aten::log10.out" => log10_out,
    "aten::log1p.out" => log1p_out,
    "aten::log2.out" => log2_out,
    "aten::sign.out" => sign_out,
    "aten::trunc.out" => trunc_out,
    "aten::isinf.out" => isinf_out,
    "aten::isnan.out" => isnan_out,
    "aten::bitwise_not.out" => bitwise_not_out,
    "aten::logit.out" => logit_out,
    "aten::elu.out" => elu_out,
    "aten::glu.out" => glu_out,
}

/// Float-only functions of `(Tensor self, *, Tensor(a!) out)`: [self, out, out].
macro_rules! float_function_kernels {
    ($($fn_name:ident, $op:literal: $f64:expr, $f32:expr;)*) => {$(
        #[doc = concat!("`", $op, "(Tensor self, *, Tensor(a!) out)`.")]
        pub fn $fn_name(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            unary(args, 1, $op, $f64, None, $f32)
        }
    )*};
}
float_function_kernels! {
    acos_out, "acos.out": libm::acos, libm::acosf;
    acosh_out, "acosh.out": libm::acosh, libm::acoshf;
    asin_out, "asin.out": libm::asin, libm::asinf;
    asinh_out, "asinh.out": libm::asinh, libm::asinhf;
    atan_out, "atan.out": libm::atan, libm::atanf;
    atanh_out, "atanh.out": libm::atanh, libm::atanhf;
    cosh_out, "cosh.out": libm::cosh, libm::coshf;
    sinh_out, "sinh.out": libm::sinh, libm::sinhf;
    tan_out, "tan.out": libm::tan, libm::tanf;
    expm1_out, "expm1.out": libm::expm1, libm::expm1f;
    log10_out, "log10.out": libm::log10, libm::log10f;
    log1p_out, "log1p.out": libm::log1p, libm::log1pf;
    log2_out, "log2.out": libm::log2, libm::log2f;
}

/// PyTorch's `(0 < x) - (x < 0)`: NaN (neither) gives 0, and -0.0 gives +0.0.
fn sign_f64(x: f64) -> f64 {
    ((0.0 < x) as i8 - (x < 0.0) as i8) as f64
}

fn sign_f32(x: f32) -> f32 {
    ((0.0 < x) as i8 - (x < 0.0) as i8) as f32
}

/// `sign.out(Tensor self, *, Tensor(a!) out)`: -1/0/1 in the input's kind (bool stays as is).
pub fn sign_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    unary(args, 1, "sign.out", sign_f64, Some(&|x: i64| x.signum()), sign_f32)
}

/// `trunc.out(Tensor self, *, Tensor(a!) out)`: integers are already whole (copied); PyTorch has
/// no bool form.
pub fn trunc_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if args.tensor(0)?.dtype == ScalarType::Bool {
        return Err(kerr!("trunc.out: a Bool input is not supported"));
    }
    unary(args, 1, "trunc.out", libm::trunc, Some(&|x: i64| x), libm::truncf)
}

/// A per-element floating test (`isinf`, `isnan`) written as 0/1 into the out (normally Bool);
/// integer and bool inputs hold no such values, so they give false everywhere.
fn float_test(args: &KernelArgs<'_>, name: &str, test: impl Fn(f64) -> bool) -> KernelResult {
    let x = args.tensor(0)?;
    let mut to = args.out(1)?;
    same_layout(name, &x, &to)?;
    to.resize(x.sizes())?;
    let floating = x.dtype.is_floating();
    let ex = Elems::of(&x)?;
    let mut eo = ElemsMut::of(&mut to)?;
    for i in 0..ex.len() {
        eo.set_bool(i, floating && test(ex.f64(i)));
    }
    Ok(())
}

/// `isinf.out(Tensor self, *, Tensor(a!) out)`.
pub fn isinf_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    float_test(args, "isinf.out", f64::is_infinite)
}

/// `isnan.out(Tensor self, *, Tensor(a!) out)`.
pub fn isnan_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    float_test(args, "isnan.out", f64::is_nan)
}

/// `bitwise_not.out(Tensor self, *, Tensor(a!) out)`: `!x` on integers, logical not on bool.
pub fn bitwise_not_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let x = args.tensor(0)?;
    if !x.dtype.is_integral(true) {
        return Err(kerr!("bitwise_not.out: needs an integer or bool input, got {}", x.dtype));
    }
    let mut to = args.out(1)?;
    same_layout("bitwise_not.out", &x, &to)?;
    to.resize(x.sizes())?;
    let ex = Elems::of(&x)?;
    let mut eo = ElemsMut::of(&mut to)?;
    if x.dtype == ScalarType::Bool {
        for i in 0..ex.len() {
            eo.set_bool(i, !ex.bool(i));
        }
    } else {
        // `!` on the sign-extended i64 keeps the low bits right for every narrower type.
        for i in 0..ex.len() {
            eo.set_i64(i, !ex.i64(i));
        }
    }
    Ok(())
}

/// `v` rounded to the floating dtype PyTorch computes in for an input of `dtype` (integer
/// inputs compute in the default Float).
fn round_to_compute_dtype(dtype: ScalarType, v: f64) -> f64 {
    match dtype {
        ScalarType::Double => v,
        ScalarType::Half => f16::from_f64(v).to_f64(),
        ScalarType::BFloat16 => bf16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// `log(x / (1 - x))`, with x first clamped to `[lo, hi]` when given (PyTorch's eps >= 0).
fn logit_f64(x: f64, bounds: Option<(f64, f64)>) -> f64 {
    let x = bounds.map_or(x, |(lo, hi)| {
        if x < lo {
            lo
        } else if x > hi {
            hi
        } else {
            x
        }
    });
    libm::log(x / (1.0 - x))
}

fn logit_f32(x: f32, bounds: Option<(f32, f32)>) -> f32 {
    let x = bounds.map_or(x, |(lo, hi)| {
        if x < lo {
            lo
        } else if x > hi {
            hi
        } else {
            x
        }
    });
    libm::logf(x / (1.0 - x))
}

/// `logit.out(Tensor self, float? eps=None, *, Tensor(a!) out)`: [self, eps, out, out]. A
/// negative eps clamps nothing, as in PyTorch.
pub fn logit_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let eps = args.opt_double(1)?.filter(|e| *e >= 0.0);
    let dtype = args.tensor(0)?.dtype;
    // The bounds are computed in the input's floating dtype, as PyTorch does (`1 - eps` rounds).
    let bounds64 = eps.map(|e| {
        let lo = round_to_compute_dtype(dtype, e);
        (lo, round_to_compute_dtype(dtype, 1.0 - lo))
    });
    let bounds32 = eps.map(|e| (e as f32, 1.0 - e as f32));
    unary(args, 2, "logit.out", |x| logit_f64(x, bounds64), None, |x| logit_f32(x, bounds32))
}

/// `elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1, *,
/// Tensor(a!) out)`: `x > 0 ? x * scale : (exp(x * input_scale) - 1) * alpha * scale`.
pub fn elu_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let x = args.tensor(0)?;
    if !x.dtype.is_floating() {
        return Err(kerr!("elu.out: needs a floating input, got {}", x.dtype));
    }
    let (alpha, scale, input_scale) = (args.scalar(1)?.to_f64(), args.scalar(2)?.to_f64(), args.scalar(3)?.to_f64());
    let (neg, pos) = (alpha * scale, scale);
    // PyTorch converts each coefficient to f32 before multiplying them.
    let (neg32, pos32, in32) = ((alpha as f32) * (scale as f32), scale as f32, input_scale as f32);
    unary(
        args,
        4,
        "elu.out",
        |v| if v <= 0.0 { (libm::exp(v * input_scale) - 1.0) * neg } else { v * pos },
        None,
        |v| if v <= 0.0 { (libm::expf(v * in32) - 1.0) * neg32 } else { v * pos32 },
    )
}

/// `glu.out(Tensor self, int dim=-1, *, Tensor(a!) out)`: splits `dim` into halves a and b and
/// gives `a * sigmoid(b)`.
pub fn glu_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let x = args.tensor(0)?;
    if x.dim() == 0 {
        return Err(kerr!("glu.out: glu does not support 0-dim tensors (the halved dim must be even)"));
    }
    if !x.dtype.is_floating() {
        return Err(kerr!("glu.out: needs a floating input, got {}", x.dtype));
    }
    let dim_arg = args.int(1)?;
    let dim = normalize_dim(dim_arg, x.dim()).map_err(|e| kerr!("glu.out: dim: {}", e.message))?;
    let n = x.sizes()[dim];
    if n % 2 != 0 {
        return Err(kerr!("glu.out: halving dimension must be even, but dimension {dim_arg} is size {n}"));
    }
    require_contiguous(&x, "glu.out: self")?;
    let mut sizes = x.sizes().to_vec();
    sizes[dim] = n / 2;
    let mut to = args.out(2)?;
    if !to.dim_order.is_contiguous() {
        return Err(kerr!("glu.out: out dim order {:?} is not supported (contiguous only)", to.dim_order));
    }
    if !to.dtype.is_floating() {
        return Err(kerr!("glu.out: needs a floating out, got {}", to.dtype));
    }
    to.resize(&sizes)?;
    // Element offsets: each outer block holds the a half, then the b half, of `half` elements.
    let half = sizes[dim..].iter().product::<usize>();
    let outer = sizes[..dim].iter().product::<usize>();
    if x.dtype == ScalarType::Float && to.dtype == ScalarType::Float {
        let (xs, os) = (x.data::<f32>()?, to.data_mut::<f32>()?);
        for (o_block, x_block) in os.chunks_exact_mut(half.max(1)).zip(xs.chunks_exact((2 * half).max(1))).take(outer) {
            let (a, b) = x_block.split_at(half);
            for ((o, &a), &b) in o_block.iter_mut().zip(a).zip(b) {
                *o = a * (1.0 / (1.0 + libm::expf(-b)));
            }
        }
        return Ok(());
    }
    let ex = Elems::of(&x)?;
    let mut eo = ElemsMut::of(&mut to)?;
    for r in 0..outer {
        for j in 0..half {
            let (a, b) = (ex.f64(2 * half * r + j), ex.f64(2 * half * r + half + j));
            eo.set_f64(half * r + j, a * (1.0 / (1.0 + libm::exp(-b))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::portable::test_util::{close, run_f32};
    use alloc::vec;
    use alloc::vec::Vec;

    use half::{bf16, f16};
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    #[test]
    fn float_functions_match_std() {
        let unit = [-0.9f32, -0.3, 0.0, 0.4, 0.95];
        let wide = [-3.0f32, -0.5, 0.0, 0.7, 2.5];
        let pos = [1.0f32, 1.5, 3.0, 10.0, 100.0];
        type Case<'a> = (KernelFn, &'a [f32], fn(f64) -> f64);
        let cases: [Case<'_>; 13] = [
            (super::acos_out, &unit, f64::acos),
            (super::asin_out, &unit, f64::asin),
            (super::atanh_out, &unit, f64::atanh),
            (super::atan_out, &wide, f64::atan),
            (super::asinh_out, &wide, f64::asinh),
            (super::cosh_out, &wide, f64::cosh),
            (super::sinh_out, &wide, f64::sinh),
            (super::tan_out, &wide, f64::tan),
            (super::expm1_out, &wide, f64::exp_m1),
            (super::log1p_out, &unit, f64::ln_1p),
            (super::acosh_out, &pos, f64::acosh),
            (super::log2_out, &pos, f64::log2),
            (super::log10_out, &pos, f64::log10),
        ];
        for (k, x, f) in cases {
            let want: Vec<f64> = x.iter().map(|&v| f(v as f64)).collect();
            close(&run_f32(k, x), &want, 2e-7);
        }
        // Outside the domain: NaN; at the poles: infinities.
        let r = run_f32(super::acos_out, &[1.5]);
        assert!(r[0].is_nan());
        assert_eq!(run_f32(super::atanh_out, &[1.0, -1.0]), vec![f32::INFINITY, f32::NEG_INFINITY]);
        assert_eq!(run_f32(super::log1p_out, &[-1.0]), vec![f32::NEG_INFINITY]);
        // expm1 keeps tiny values exact where exp(x) - 1 would lose them.
        assert_eq!(run_f32(super::expm1_out, &[1e-10]), vec![1e-10]);
    }

    #[test]
    fn float_functions_promote_integers_and_keep_half() {
        let mut h = OpHarness::new();
        let x = h.i64(&[4], &[1, 2, 8, 1024]);
        let o = h.out(ScalarType::Float, &[4]);
        h.call(super::log2_out, &[x, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![0.0, 1.0, 3.0, 10.0]);
        let u = h.tensor(ScalarType::Byte, &[2], &[0u8, 1]);
        let od = h.out(ScalarType::Double, &[2]);
        h.call(super::acos_out, &[u, od, od]).unwrap();
        assert_eq!(h.read::<f64>(od), vec![core::f64::consts::FRAC_PI_2, 0.0]);
        let b = h.bool_tensor(&[2], &[false, true]);
        h.call(super::sinh_out, &[b, od, od]).unwrap();
        assert_eq!(h.read::<f64>(od), vec![0.0, 1f64.sinh()]);
        // An integer out cannot hold a float function's result.
        let oi = h.out(ScalarType::Long, &[4]);
        assert!(h.call(super::log2_out, &[x, oi, oi]).is_err());

        let xh = h.tensor(ScalarType::Half, &[2], &[f16::from_f32(0.5), f16::from_f32(-0.25)]);
        let oh = h.out(ScalarType::Half, &[2]);
        h.call(super::asin_out, &[xh, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f64(0.5f64.asin()), f16::from_f64((-0.25f64).asin())]);
        let xb = h.tensor(ScalarType::BFloat16, &[1], &[bf16::from_f32(2.0)]);
        let ob = h.out(ScalarType::BFloat16, &[1]);
        h.call(super::cosh_out, &[xb, ob, ob]).unwrap();
        assert_eq!(h.read::<bf16>(ob), vec![bf16::from_f64(2f64.cosh())]);
    }

    #[test]
    fn sign_of_every_kind() {
        let r = run_f32(super::sign_out, &[-2.5, -0.0, 0.0, 3.0, f32::NAN, f32::NEG_INFINITY]);
        // PyTorch's (0 < x) - (x < 0): NaN gives 0, -0.0 gives +0.0.
        assert_eq!(r, vec![-1.0, 0.0, 0.0, 1.0, 0.0, -1.0]);
        assert!(r[1].is_sign_positive());
        let mut h = OpHarness::new();
        let x = h.i64(&[4], &[i64::MIN, -7, 0, 9]);
        let o = h.out(ScalarType::Long, &[4]);
        h.call(super::sign_out, &[x, o, o]).unwrap();
        assert_eq!(h.read::<i64>(o), vec![-1, -1, 0, 1]);
        let u = h.tensor(ScalarType::Byte, &[3], &[0u8, 1, 255]);
        let ou = h.out(ScalarType::Byte, &[3]);
        h.call(super::sign_out, &[u, ou, ou]).unwrap();
        assert_eq!(h.read::<u8>(ou), vec![0, 1, 1]);
        let b = h.bool_tensor(&[2], &[true, false]);
        let ob = h.out(ScalarType::Bool, &[2]);
        h.call(super::sign_out, &[b, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![true, false]);
        let xd = h.tensor(ScalarType::Double, &[2], &[-1e-300f64, f64::NAN]);
        let od = h.out(ScalarType::Double, &[2]);
        h.call(super::sign_out, &[xd, od, od]).unwrap();
        assert_eq!(h.read::<f64>(od), vec![-1.0, 0.0]);
        // A float input cannot go to an integer out.
        let f = h.f32(&[1], &[1.0]);
        let oi = h.out(ScalarType::Long, &[1]);
        assert!(h.call(super::sign_out, &[f, oi, oi]).is_err());
    }

    #[test]
    fn trunc_floats_and_integers() {
        assert_eq!(run_f32(super::trunc_out, &[-2.7, -0.5, 0.5, 2.5, 1e20]), vec![-2.0, -0.0, 0.0, 2.0, 1e20]);
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Int, &[3], &[-5i32, 0, 7]);
        let o = h.out(ScalarType::Int, &[3]);
        h.call(super::trunc_out, &[x, o, o]).unwrap();
        assert_eq!(h.read::<i32>(o), vec![-5, 0, 7]);
        let b = h.bool_tensor(&[1], &[true]);
        let ob = h.out(ScalarType::Bool, &[1]);
        let e = h.call(super::trunc_out, &[b, ob, ob]).unwrap_err();
        assert!(e.message.contains("Bool"), "{e}");
    }

    #[test]
    fn isinf_isnan_any_dtype() {
        let mut h = OpHarness::new();
        let x = h.f32(&[5], &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 0.0, f32::MAX]);
        let o = h.out(ScalarType::Bool, &[5]);
        h.call(super::isinf_out, &[x, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, true, false, false, false]);
        h.call(super::isnan_out, &[x, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![false, false, true, false, false]);
        let xh = h.tensor(ScalarType::Half, &[3], &[f16::INFINITY, f16::NAN, f16::MAX]);
        let oh = h.out(ScalarType::Bool, &[3]);
        h.call(super::isinf_out, &[xh, oh, oh]).unwrap();
        assert_eq!(h.read_bool(oh), vec![true, false, false]);
        h.call(super::isnan_out, &[xh, oh, oh]).unwrap();
        assert_eq!(h.read_bool(oh), vec![false, true, false]);
        // Integers are never inf or NaN.
        let xi = h.i64(&[2, 2], &[i64::MAX, i64::MIN, 0, 1]);
        let oi = h.out(ScalarType::Bool, &[2, 2]);
        h.call(super::isinf_out, &[xi, oi, oi]).unwrap();
        assert_eq!(h.read_bool(oi), vec![false; 4]);
        h.call(super::isnan_out, &[xi, oi, oi]).unwrap();
        assert_eq!(h.read_bool(oi), vec![false; 4]);
        // Rank 0 and empty.
        let s = h.tensor(ScalarType::Double, &[], &[f64::NAN]);
        let os = h.out(ScalarType::Bool, &[]);
        h.call(super::isnan_out, &[s, os, os]).unwrap();
        assert_eq!(h.read_bool(os), vec![true]);
        let e = h.f32(&[0, 2], &[]);
        let oe = h.out(ScalarType::Bool, &[0, 2]);
        h.call(super::isinf_out, &[e, oe, oe]).unwrap();
        // Wrong out shape.
        let bad = h.out(ScalarType::Bool, &[4]);
        assert!(h.call(super::isinf_out, &[x, bad, bad]).is_err());
    }

    #[test]
    fn bitwise_not_integers_and_bool() {
        let mut h = OpHarness::new();
        let b = h.bool_tensor(&[2], &[true, false]);
        let ob = h.out(ScalarType::Bool, &[2]);
        h.call(super::bitwise_not_out, &[b, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![false, true]);
        let x = h.i64(&[3], &[0, -1, 5]);
        let o = h.out(ScalarType::Long, &[3]);
        h.call(super::bitwise_not_out, &[x, o, o]).unwrap();
        assert_eq!(h.read::<i64>(o), vec![-1, 0, -6]);
        let u = h.tensor(ScalarType::Byte, &[3], &[0u8, 15, 255]);
        let ou = h.out(ScalarType::Byte, &[3]);
        h.call(super::bitwise_not_out, &[u, ou, ou]).unwrap();
        assert_eq!(h.read::<u8>(ou), vec![255, 240, 0]);
        let c = h.tensor(ScalarType::Char, &[2], &[127i8, -128]);
        let oc = h.out(ScalarType::Char, &[2]);
        h.call(super::bitwise_not_out, &[c, oc, oc]).unwrap();
        assert_eq!(h.read::<i8>(oc), vec![-128, 127]);
        let f = h.f32(&[1], &[1.0]);
        let of = h.out(ScalarType::Float, &[1]);
        let e = h.call(super::bitwise_not_out, &[f, of, of]).unwrap_err();
        assert!(e.message.contains("integer or bool"), "{e}");
    }

    #[test]
    fn logit_with_and_without_eps() {
        let mut h = OpHarness::new();
        let x = h.f32(&[5], &[0.0, 0.25, 0.5, 0.9, 1.0]);
        let none = h.none();
        let o = h.out(ScalarType::Float, &[5]);
        h.call(super::logit_out, &[x, none, o, o]).unwrap();
        let want: Vec<f64> = [0.0f64, 0.25, 0.5, 0.9, 1.0].iter().map(|&p| (p / (1.0 - p)).ln()).collect();
        close(&h.read::<f32>(o), &want, 1e-6);
        assert_eq!(h.read::<f32>(o)[0], f32::NEG_INFINITY);
        assert_eq!(h.read::<f32>(o)[4], f32::INFINITY);

        let eps = h.double(0.1);
        h.call(super::logit_out, &[x, eps, o, o]).unwrap();
        let clamp = |p: f64| p.clamp(0.1f32 as f64, (1.0 - 0.1f32) as f64);
        let want: Vec<f64> =
            [0.0f64, 0.25, 0.5, 0.9, 1.0].iter().map(|&p| (clamp(p) / (1.0 - clamp(p))).ln()).collect();
        close(&h.read::<f32>(o), &want, 1e-6);

        // A negative eps clamps nothing; NaN stays NaN.
        let neg = h.double(-0.5);
        let y = h.f32(&[2], &[1.0, f32::NAN]);
        let oy = h.out(ScalarType::Float, &[2]);
        h.call(super::logit_out, &[y, neg, oy, oy]).unwrap();
        let r = h.read::<f32>(oy);
        assert!(r[0] == f32::INFINITY && r[1].is_nan());

        // Integer input: float out; eps bounds rounded in the dtype computed in.
        let xi = h.i64(&[2], &[0, 1]);
        let oi = h.out(ScalarType::Float, &[2]);
        h.call(super::logit_out, &[xi, eps, oi, oi]).unwrap();
        close(&h.read::<f32>(oi), &[(0.1f64 / 0.9).ln(), (0.9f64 / 0.1).ln()], 1e-6);
        let xh = h.tensor(ScalarType::Half, &[1], &[f16::from_f32(1.0)]);
        let oh = h.out(ScalarType::Half, &[1]);
        let small = h.double(1e-3);
        h.call(super::logit_out, &[xh, small, oh, oh]).unwrap();
        let lo = f16::from_f64(1e-3).to_f64();
        let hi = f16::from_f64(1.0 - lo).to_f64();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f64((hi / (1.0 - hi)).ln())]);
    }

    #[test]
    fn elu_parameters() {
        let mut h = OpHarness::new();
        let x = h.f32(&[4], &[-2.0, -0.5, 0.0, 3.0]);
        let (one, o) = (h.int(1), h.out(ScalarType::Float, &[4]));
        h.call(super::elu_out, &[x, one, one, one, o, o]).unwrap();
        close(&h.read::<f32>(o), &[(-2f64).exp_m1(), (-0.5f64).exp_m1(), 0.0, 3.0], 1e-6);
        let (alpha, scale, input_scale) = (h.double(0.5), h.double(2.0), h.double(3.0));
        h.call(super::elu_out, &[x, alpha, scale, input_scale, o, o]).unwrap();
        let want = [(-6f64).exp_m1(), (-1.5f64).exp_m1(), 0.0].map(|v| v * 0.5 * 2.0);
        close(&h.read::<f32>(o), &[want[0], want[1], want[2], 6.0], 1e-6);

        let xd = h.tensor(ScalarType::Double, &[2], &[-1.0f64, 1.0]);
        let od = h.out(ScalarType::Double, &[2]);
        h.call(super::elu_out, &[xd, alpha, one, one, od, od]).unwrap();
        assert_eq!(h.read::<f64>(od), vec![(-1f64).exp_m1() * 0.5, 1.0]);

        let xi = h.i64(&[1], &[1]);
        let oi = h.out(ScalarType::Float, &[1]);
        let e = h.call(super::elu_out, &[xi, one, one, one, oi, oi]).unwrap_err();
        assert!(e.message.contains("floating input"), "{e}");
    }

    #[test]
    fn glu_halves_any_dim() {
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let mut h = OpHarness::new();
        // [2, 4]: dim -1 splits each row into (a, b) pairs of 2.
        let x = h.f32(&[2, 4], &[1., 2., 0., 1., 3., 4., -1., 2.]);
        let last = h.int(-1);
        let o = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::glu_out, &[x, last, o, o]).unwrap();
        close(&h.read::<f32>(o), &[sig(0.0), 2.0 * sig(1.0), 3.0 * sig(-1.0), 4.0 * sig(2.0)], 1e-6);
        // dim 0: a is row 0, b is row 1.
        let zero = h.int(0);
        let o0 = h.out(ScalarType::Float, &[1, 4]);
        h.call(super::glu_out, &[x, zero, o0, o0]).unwrap();
        close(&h.read::<f32>(o0), &[sig(3.0), 2.0 * sig(4.0), 0.0, sig(2.0)], 1e-6);
        // A middle dim of a [1, 2, 3] f64 tensor.
        let xd = h.tensor(ScalarType::Double, &[1, 2, 3], &[1.0f64, 2.0, 3.0, 0.0, -1.0, 1.0]);
        let one = h.int(1);
        let od = h.out(ScalarType::Double, &[1, 1, 3]);
        h.call(super::glu_out, &[xd, one, od, od]).unwrap();
        let r = h.read::<f64>(od);
        for (g, w) in r.iter().zip([sig(0.0), 2.0 * sig(-1.0), 3.0 * sig(1.0)]) {
            assert!((g - w).abs() < 1e-12, "{r:?}");
        }
        let xh = h.tensor(ScalarType::Half, &[2], &[f16::from_f32(2.0), f16::from_f32(0.0)]);
        let oh = h.out(ScalarType::Half, &[1]);
        h.call(super::glu_out, &[xh, zero, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f32(1.0)]);
        // Empty outer dims.
        let xe = h.f32(&[0, 4], &[]);
        let oe = h.out(ScalarType::Float, &[0, 2]);
        h.call(super::glu_out, &[xe, last, oe, oe]).unwrap();
    }

    #[test]
    fn glu_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0.; 6]);
        let (last, two, zero) = (h.int(-1), h.int(2), h.int(0));
        let o = h.out(ScalarType::Float, &[2, 1]);
        let e = h.call(super::glu_out, &[x, last, o, o]).unwrap_err();
        assert!(e.message.contains("even"), "{e}");
        assert!(h.call(super::glu_out, &[x, two, o, o]).is_err());
        let s = h.f32(&[], &[1.0]);
        let os = h.out(ScalarType::Float, &[]);
        assert!(h.call(super::glu_out, &[s, zero, os, os]).is_err());
        let xi = h.i64(&[2], &[1, 2]);
        let oi = h.out(ScalarType::Long, &[1]);
        assert!(h.call(super::glu_out, &[xi, zero, oi, oi]).is_err());
        // Out of the wrong shape.
        let bad = h.out(ScalarType::Float, &[2, 3]);
        let x4 = h.f32(&[2, 4], &[0.; 8]);
        assert!(h.call(super::glu_out, &[x4, last, bad, bad]).is_err());
    }
}
