//! Elementwise unary operators: activations, math functions, rounding, clamps, `logical_not`.
//!
//! Each op has an f32 form (the f32 → f32 fast path), an f64 form (every other floating out,
//! including integer inputs of float functions such as `rsqrt(int)`), and, where PyTorch defines
//! one, an i64 form for integer outs.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, Scalar, ScalarType};

use super::binary::{broadcast_plan, out_dtype, Operand};
use super::util::{for_each_broadcast, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::relu.out" => relu_out,
    "aten::sigmoid.out" => sigmoid_out,
    "aten::neg.out" => neg_out,
    "aten::abs.out" => abs_out,
    "aten::rsqrt.out" => rsqrt_out,
    "aten::sqrt.out" => sqrt_out,
    "aten::reciprocal.out" => reciprocal_out,
    "aten::exp.out" => exp_out,
    "aten::log.out" => log_out,
    "aten::tanh.out" => tanh_out,
    "aten::sin.out" => sin_out,
    "aten::cos.out" => cos_out,
    "aten::erf.out" => erf_out,
    "aten::floor.out" => floor_out,
    "aten::ceil.out" => ceil_out,
    "aten::round.out" => round_out,
    "aten::gelu.out" => gelu_out,
    "aten::silu.out" => silu_out,
    "aten::hardswish.out" => hardswish_out,
    "aten::hardsigmoid.out" => hardsigmoid_out,
    "aten::leaky_relu.out" => leaky_relu_out,
    "aten::hardtanh.out" => hardtanh_out,
    "aten::clamp.out" => clamp_out,
    "aten::clamp.Tensor_out" => clamp_tensor_out,
    "aten::logical_not.out" => logical_not_out,
}

/// Elementwise ops read the input's linear order, so input and out must share a dim order.
pub(super) fn same_layout(name: &str, x: &TensorRef<'_>, out: &TensorMut<'_>) -> KernelResult {
    if x.dim_order == out.dim_order || (x.dim_order.is_contiguous() && out.dim_order.is_contiguous()) {
        Ok(())
    } else {
        Err(kerr!("{name}: input dim order {:?} differs from out dim order {:?}", x.dim_order, out.dim_order))
    }
}

/// Applies an op from args[0] into args[out]: `f32f` for f32 → f32, `ff` in f64 for other
/// floating outs, `fi` in i64 for integer/bool outs (None: the op has no integer form).
pub(super) fn unary(
    args: &KernelArgs<'_>,
    out: usize,
    name: &str,
    ff: impl Fn(f64) -> f64,
    fi: Option<&dyn Fn(i64) -> i64>,
    f32f: impl Fn(f32) -> f32,
) -> KernelResult {
    let x = args.tensor(0)?;
    let mut to = args.out(out)?;
    same_layout(name, &x, &to)?;
    to.resize(x.sizes())?;
    if x.dtype == ScalarType::Float && to.dtype == ScalarType::Float {
        let (xs, os) = (x.data::<f32>()?, to.data_mut::<f32>()?);
        for (o, &v) in os.iter_mut().zip(xs) {
            *o = f32f(v);
        }
        return Ok(());
    }
    let ex = Elems::of(&x)?;
    let out_dtype = to.dtype;
    let mut eo = ElemsMut::of(&mut to)?;
    if eo.is_floating() {
        for i in 0..ex.len() {
            eo.set_f64(i, ff(ex.f64(i)));
        }
    } else if x.dtype.is_floating() {
        return Err(kerr!("{name}: a {} input cannot produce a {out_dtype} out", x.dtype));
    } else if let Some(fi) = fi {
        for i in 0..ex.len() {
            eo.set_i64(i, fi(ex.i64(i)));
        }
    } else {
        return Err(kerr!("{name}: needs a floating out, got {out_dtype}"));
    }
    Ok(())
}

/// Float-only functions of `(Tensor self, *, Tensor(a!) out)`: [self, out, out].
macro_rules! float_kernels {
    ($($fn_name:ident, $op:literal: $f64:expr, $f32:expr;)*) => {$(
        #[doc = concat!("`", $op, "(Tensor self, *, Tensor(a!) out)`.")]
        pub fn $fn_name(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            unary(args, 1, $op, $f64, None, $f32)
        }
    )*};
}
float_kernels! {
    sigmoid_out, "sigmoid.out": |x| 1.0 / (1.0 + libm::exp(-x)), |x| 1.0 / (1.0 + libm::expf(-x));
    rsqrt_out, "rsqrt.out": |x| 1.0 / libm::sqrt(x), |x| 1.0 / libm::sqrtf(x);
    sqrt_out, "sqrt.out": libm::sqrt, libm::sqrtf;
    reciprocal_out, "reciprocal.out": |x| 1.0 / x, |x| 1.0 / x;
    exp_out, "exp.out": libm::exp, libm::expf;
    log_out, "log.out": libm::log, libm::logf;
    tanh_out, "tanh.out": libm::tanh, libm::tanhf;
    sin_out, "sin.out": libm::sin, libm::sinf;
    cos_out, "cos.out": libm::cos, libm::cosf;
    erf_out, "erf.out": libm::erf, libm::erff;
    silu_out, "silu.out": |x| x / (1.0 + libm::exp(-x)), |x| x / (1.0 + libm::expf(-x));
    hardswish_out, "hardswish.out": |x| x * clamp(x + 3.0, Some(0.0), Some(6.0)) / 6.0,
        |x| x * clamp(x + 3.0, Some(0.0), Some(6.0)) / 6.0;
    hardsigmoid_out, "hardsigmoid.out": |x| clamp(x + 3.0, Some(0.0), Some(6.0)) / 6.0,
        |x| clamp(x + 3.0, Some(0.0), Some(6.0)) / 6.0;
}

/// Functions that keep integers as they are (rounding) or have an integer form.
macro_rules! real_kernels {
    ($($fn_name:ident, $op:literal: $f64:expr, $i64:expr, $f32:expr;)*) => {$(
        #[doc = concat!("`", $op, "(Tensor self, *, Tensor(a!) out)`.")]
        pub fn $fn_name(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            unary(args, 1, $op, $f64, Some(&$i64), $f32)
        }
    )*};
}
real_kernels! {
    // `x < 0` is false for NaN, so NaN passes through as in PyTorch.
    relu_out, "relu.out": |x| if x < 0.0 { 0.0 } else { x }, |x: i64| x.max(0), |x| if x < 0.0 { 0.0 } else { x };
    floor_out, "floor.out": libm::floor, |x: i64| x, libm::floorf;
    ceil_out, "ceil.out": libm::ceil, |x: i64| x, libm::ceilf;
    // rint rounds half to even, as torch.round does.
    round_out, "round.out": libm::rint, |x: i64| x, libm::rintf;
}

/// `abs.out(Tensor self, *, Tensor(a!) out)`: complex inputs give their magnitude.
pub fn abs_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if cfg!(feature = "complex") && super::complex_arith::is_complex(args.tensor(0)?.dtype) {
        return super::complex_arith::abs(args, 1);
    }
    unary(args, 1, "abs.out", libm::fabs, Some(&|x: i64| x.wrapping_abs()), libm::fabsf)
}

/// `neg.out(Tensor self, *, Tensor(a!) out)`.
pub fn neg_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if args.tensor(0)?.dtype == ScalarType::Bool {
        return Err(kerr!("neg.out: negation of a bool tensor is not supported"));
    }
    unary(args, 1, "neg.out", |x| -x, Some(&|x: i64| x.wrapping_neg()), |x| -x)
}

/// `min(max(x, lo), hi)` as PyTorch's clamp: NaN input or bound gives NaN, lo > hi gives hi.
fn clamp<T: PartialOrd + Copy>(x: T, lo: Option<T>, hi: Option<T>) -> T {
    let is_nan = |v: T| v.partial_cmp(&v).is_none();
    let mut v = x;
    if let Some(l) = lo {
        if v < l || is_nan(l) {
            v = l;
        }
    }
    if let Some(h) = hi {
        if v > h || is_nan(h) {
            v = h;
        }
    }
    v
}

/// Clamps args[0] between optional scalar bounds into args[out].
fn clamp_scalar(args: &KernelArgs<'_>, out: usize, name: &str, lo: Option<Scalar>, hi: Option<Scalar>) -> KernelResult {
    let out_dt = out_dtype(args, out)?;
    if !out_dt.is_floating() && [lo, hi].iter().flatten().any(|s| s.is_floating()) {
        return Err(kerr!("{name}: floating bounds {lo:?}/{hi:?} with a {out_dt} out"));
    }
    let (lf, hf) = (lo.map(Scalar::to_f64), hi.map(Scalar::to_f64));
    let (li, hi_i) = (lo.map(Scalar::to_i64), hi.map(Scalar::to_i64));
    // PyTorch casts the bounds to f32 next to an f32 tensor.
    let (l32, h32) = (lf.map(|v| v as f32), hf.map(|v| v as f32));
    unary(args, out, name, |x| clamp(x, lf, hf), Some(&|x| clamp(x, li, hi_i)), |x| clamp(x, l32, h32))
}

/// `hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out)`.
pub fn hardtanh_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    clamp_scalar(args, 3, "hardtanh.out", Some(args.scalar(1)?), Some(args.scalar(2)?))
}

/// `clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)`.
pub fn clamp_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (lo, hi) = (args.opt_scalar(1)?, args.opt_scalar(2)?);
    if lo.is_none() && hi.is_none() {
        return Err(kerr!("clamp.out: at least one of min and max must be given"));
    }
    clamp_scalar(args, 3, "clamp.out", lo, hi)
}

/// `clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, Tensor(a!) out)`:
/// self and the given bounds broadcast together.
pub fn clamp_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (lo, hi) = (args.opt_tensor(1)?, args.opt_tensor(2)?);
    if lo.is_none() && hi.is_none() {
        return Err(kerr!("clamp.Tensor_out: at least one of min and max must be given"));
    }
    // A missing bound becomes an unused 0-dim placeholder so all three broadcast uniformly.
    let absent = Operand::Scalar(Scalar::Int(0));
    let ops = [Operand::tensor(args, 0)?, lo.map_or(absent, Operand::Tensor), hi.map_or(absent, Operand::Tensor)];
    let mut to = args.out(3)?;
    let (sizes, st) = broadcast_plan(&ops, &to)?;
    to.resize(&sizes)?;
    let (ex, el, eh) = (ops[0].src(None)?, ops[1].src(None)?, ops[2].src(None)?);
    let (has_lo, has_hi) = (lo.is_some(), hi.is_some());
    let out_dt = to.dtype;
    let mut eo = ElemsMut::of(&mut to)?;
    if eo.is_floating() {
        for_each_broadcast(&sizes, [&st[0], &st[1], &st[2]], |o, [i, j, k]| {
            eo.set_f64(o, clamp(ex.f64(i), has_lo.then(|| el.f64(j)), has_hi.then(|| eh.f64(k))))
        });
    } else if ops.iter().any(Operand::is_floating) {
        return Err(kerr!("clamp.Tensor_out: floating inputs cannot produce a {out_dt} out"));
    } else {
        for_each_broadcast(&sizes, [&st[0], &st[1], &st[2]], |o, [i, j, k]| {
            eo.set_i64(o, clamp(ex.i64(i), has_lo.then(|| el.i64(j)), has_hi.then(|| eh.i64(k))))
        });
    }
    Ok(())
}

/// `leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out)`.
pub fn leaky_relu_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let slope = args.scalar(1)?.to_f64();
    let s32 = slope as f32;
    unary(
        args,
        2,
        "leaky_relu.out",
        |x| if x > 0.0 { x } else { x * slope },
        None,
        |x| if x > 0.0 { x } else { x * s32 },
    )
}

/// `gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out)`: exact (erf) or tanh form.
pub fn gelu_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    const K32: f32 = SQRT_2_OVER_PI as f32;
    use core::f32::consts::FRAC_1_SQRT_2 as R32;
    use core::f64::consts::FRAC_1_SQRT_2 as R64;
    match args.string(1)? {
        "none" => unary(
            args,
            2,
            "gelu.out",
            |x| 0.5 * x * (1.0 + libm::erf(x * R64)),
            None,
            |x| 0.5 * x * (1.0 + libm::erff(x * R32)),
        ),
        "tanh" => unary(
            args,
            2,
            "gelu.out",
            |x| 0.5 * x * (1.0 + libm::tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))),
            None,
            |x| 0.5 * x * (1.0 + libm::tanhf(K32 * (x + 0.044715 * x * x * x))),
        ),
        a => Err(kerr!("gelu.out: unknown approximate {a:?} (expected \"none\" or \"tanh\")")),
    }
}

/// `logical_not.out(Tensor self, *, Tensor(a!) out)`: any input dtype (`== 0`), any out dtype.
pub fn logical_not_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let x = args.tensor(0)?;
    let mut to = args.out(1)?;
    same_layout("logical_not.out", &x, &to)?;
    to.resize(x.sizes())?;
    if x.dtype == ScalarType::Bool && to.dtype == ScalarType::Bool {
        for (o, &v) in to.data_mut::<u8>()?.iter_mut().zip(x.data::<u8>()?) {
            *o = (v == 0) as u8;
        }
        return Ok(());
    }
    let ex = Elems::of(&x)?;
    let mut eo = ElemsMut::of(&mut to)?;
    for i in 0..ex.len() {
        eo.set_bool(i, !ex.bool(i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::portable::test_util::{close, run_f32};
    use alloc::vec;
    use alloc::vec::Vec;

    use half::bf16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::{ScalarType, Value};

    #[test]
    fn float_functions_f32() {
        let x = [-2.0f32, -0.5, 0.0, 1.0, 3.0];
        let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        // Expected values from closed forms evaluated in std f64.
        let sig: Vec<f64> = xs.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
        close(&run_f32(super::sigmoid_out, &x), &sig, 1e-6);
        close(&run_f32(super::silu_out, &x), &xs.iter().zip(&sig).map(|(v, s)| v * s).collect::<Vec<_>>(), 1e-6);
        close(&run_f32(super::exp_out, &x), &xs.iter().map(|v| v.exp()).collect::<Vec<_>>(), 1e-6);
        close(&run_f32(super::tanh_out, &x), &xs.iter().map(|v| v.tanh()).collect::<Vec<_>>(), 1e-6);
        close(&run_f32(super::sin_out, &x), &xs.iter().map(|v| v.sin()).collect::<Vec<_>>(), 1e-6);
        close(&run_f32(super::cos_out, &x), &xs.iter().map(|v| v.cos()).collect::<Vec<_>>(), 1e-6);
        close(
            &run_f32(super::erf_out, &x),
            &[
                -0.995_322_265_018_952_7,
                -0.520_499_877_813_046_5,
                0.0,
                0.842_700_792_949_714_9,
                0.999_977_909_503_001_4,
            ],
            1e-6,
        );
        close(&run_f32(super::neg_out, &x), &[2.0, 0.5, 0.0, -1.0, -3.0], 0.0);
        close(&run_f32(super::relu_out, &x), &[0.0, 0.0, 0.0, 1.0, 3.0], 0.0);
        close(&run_f32(super::abs_out, &x), &[2.0, 0.5, 0.0, 1.0, 3.0], 0.0);
        close(&run_f32(super::hardswish_out, &x), &[-1.0 / 3.0, -0.5 * 2.5 / 6.0, 0.0, 4.0 / 6.0, 3.0], 1e-6);
        close(&run_f32(super::hardsigmoid_out, &x), &[1.0 / 6.0, 2.5 / 6.0, 0.5, 4.0 / 6.0, 1.0], 1e-6);
        let p = [0.25f32, 1.0, 4.0];
        close(&run_f32(super::rsqrt_out, &p), &[2.0, 1.0, 0.5], 1e-7);
        close(&run_f32(super::sqrt_out, &p), &[0.5, 1.0, 2.0], 0.0);
        close(&run_f32(super::reciprocal_out, &p), &[4.0, 1.0, 0.25], 0.0);
        close(&run_f32(super::log_out, &p), &[-(4f64.ln()), 0.0, 4f64.ln()], 1e-6);
        // Rounding: round is half-to-even.
        let r = [-1.5f32, -0.5, 0.5, 1.5, 2.5, 2.7];
        close(&run_f32(super::round_out, &r), &[-2.0, -0.0, 0.0, 2.0, 2.0, 3.0], 0.0);
        close(&run_f32(super::floor_out, &r), &[-2.0, -1.0, 0.0, 1.0, 2.0, 2.0], 0.0);
        close(&run_f32(super::ceil_out, &r), &[-1.0, -0.0, 1.0, 2.0, 3.0, 3.0], 0.0);
    }

    #[test]
    fn sigmoid_extremes_and_large_angles() {
        assert_eq!(run_f32(super::sigmoid_out, &[-100.0, 100.0]), vec![0.0, 1.0]);
        let x = [-200.0f32, 123.456, 200.0];
        let want: Vec<f64> = x.iter().map(|&v| (v as f64).sin()).collect();
        close(&run_f32(super::sin_out, &x), &want, 1e-6);
        let want: Vec<f64> = x.iter().map(|&v| (v as f64).cos()).collect();
        close(&run_f32(super::cos_out, &x), &want, 1e-6);
    }

    #[test]
    fn integer_inputs() {
        let mut h = OpHarness::new();
        let x = h.i64(&[3], &[-3, 0, 4]);
        let of = h.out(ScalarType::Float, &[3]);
        // rsqrt of an int gives the (float) out dtype.
        let xp = h.i64(&[2], &[4, 16]);
        let of2 = h.out(ScalarType::Float, &[2]);
        h.call(super::rsqrt_out, &[xp, of2, of2]).unwrap();
        assert_eq!(h.read::<f32>(of2), vec![0.5, 0.25]);
        h.call(super::exp_out, &[x, of, of]).unwrap();
        close(&h.read::<f32>(of), &[(-3f64).exp(), 1.0, 4f64.exp()], 1e-6);

        let oi = h.out(ScalarType::Long, &[3]);
        h.call(super::neg_out, &[x, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![3, 0, -4]);
        h.call(super::abs_out, &[x, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![3, 0, 4]);
        h.call(super::relu_out, &[x, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![0, 0, 4]);
        // No integer form for exp.
        let e = h.call(super::exp_out, &[x, oi, oi]).unwrap_err();
        assert!(e.message.contains("floating out"), "{e}");
        let b = h.bool_tensor(&[1], &[true]);
        let ob = h.out(ScalarType::Bool, &[1]);
        assert!(h.call(super::neg_out, &[b, ob, ob]).is_err());
    }

    #[test]
    fn bf16_goes_through_f64() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::BFloat16, &[2], &[bf16::from_f32(-1.0), bf16::from_f32(2.0)]);
        let o = h.out(ScalarType::BFloat16, &[2]);
        h.call(super::relu_out, &[x, o, o]).unwrap();
        assert_eq!(h.read::<bf16>(o), vec![bf16::from_f32(0.0), bf16::from_f32(2.0)]);
    }

    #[test]
    fn gelu_erf_and_tanh() {
        let x = [-1.0f32, 0.0, 0.5, 2.0];
        let mut h = OpHarness::new();
        let a = h.f32(&[4], &x);
        let o = h.out(ScalarType::Float, &[4]);
        for (mode, want) in [
            // x * Phi(x) with Phi from erf values.
            ("none", [-0.158_655_253_931_457_07, 0.0, 0.345_731_230_637_006_56, 1.954_499_736_103_641_6]),
            ("tanh", [-0.158_808_009_391_723_24, 0.0, 0.345_714_009_825_143_94, 1.954_597_694_087_775]),
        ] {
            let m = h.frame.values.len() as u32;
            h.frame.values.push(Value::String(mode.into()));
            h.call(super::gelu_out, &[a, m, o, o]).unwrap();
            close(&h.read::<f32>(o), &want, 2e-7);
        }
        let m = h.frame.values.len() as u32;
        h.frame.values.push(Value::String("fast".into()));
        assert!(h.call(super::gelu_out, &[a, m, o, o]).is_err());
    }

    #[test]
    fn hardtanh_clamp_leaky() {
        let mut h = OpHarness::new();
        let x = h.f32(&[5], &[-3.0, -0.6, 0.2, 0.9, 8.0]);
        let o = h.out(ScalarType::Float, &[5]);
        let (lo, hi) = (h.int(-1), h.int(1));
        h.call(super::hardtanh_out, &[x, lo, hi, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-1.0, -0.6, 0.2, 0.9, 1.0]);
        let (z, six) = (h.double(0.0), h.double(6.0));
        h.call(super::hardtanh_out, &[x, z, six, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![0.0, 0.0, 0.2, 0.9, 6.0]);

        let (mn, mx, none) = (h.double(-0.5), h.double(0.7), h.none());
        h.call(super::clamp_out, &[x, mn, mx, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-0.5, -0.5, 0.2, 0.7, 0.7]);
        h.call(super::clamp_out, &[x, z, none, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![0.0, 0.0, 0.2, 0.9, 8.0]);
        h.call(super::clamp_out, &[x, none, mn, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-3.0, -0.6, -0.5, -0.5, -0.5]);
        // min > max gives max everywhere, as PyTorch.
        h.call(super::clamp_out, &[x, mx, mn, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-0.5; 5]);
        let e = h.call(super::clamp_out, &[x, none, none, o, o]).unwrap_err();
        assert!(e.message.contains("at least one"), "{e}");

        let xi = h.i64(&[4], &[-5, 0, 3, 9]);
        let oi = h.out(ScalarType::Long, &[4]);
        let (one, five) = (h.int(1), h.int(5));
        h.call(super::clamp_out, &[xi, one, five, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1, 1, 3, 5]);
        assert!(h.call(super::clamp_out, &[xi, mn, five, oi, oi]).is_err());

        let slope = h.double(0.1);
        h.call(super::leaky_relu_out, &[x, slope, o, o]).unwrap();
        close(&h.read::<f32>(o), &[-0.3, -0.06, 0.2, 0.9, 8.0], 1e-7);
    }

    #[test]
    fn clamp_tensor_bounds_broadcast() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[-5., 0., 5., -5., 0., 5.]);
        let lo = h.f32(&[2, 1], &[-1., 1.]);
        let hi = h.f32(&[3], &[2., 3., 4.]);
        let none = h.none();
        let o = h.out(ScalarType::Float, &[2, 3]);
        h.call(super::clamp_tensor_out, &[x, lo, hi, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-1., 0., 4., 1., 1., 4.]);
        h.call(super::clamp_tensor_out, &[x, none, hi, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![-5., 0., 4., -5., 0., 4.]);
        let xi = h.i64(&[3], &[-2, 5, 9]);
        let li = h.i64(&[1], &[0]);
        let oi = h.out(ScalarType::Long, &[3]);
        h.call(super::clamp_tensor_out, &[xi, li, none, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![0, 5, 9]);
        assert!(h.call(super::clamp_tensor_out, &[xi, none, none, oi, oi]).is_err());
    }

    #[test]
    fn logical_not_any_dtype() {
        let mut h = OpHarness::new();
        let b = h.bool_tensor(&[3], &[true, false, true]);
        let o = h.out(ScalarType::Bool, &[3]);
        h.call(super::logical_not_out, &[b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![false, true, false]);
        let f = h.f32(&[3], &[0.0, -0.0, 2.5]);
        h.call(super::logical_not_out, &[f, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, true, false]);
        let of = h.out(ScalarType::Float, &[3]);
        h.call(super::logical_not_out, &[f, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![1.0, 1.0, 0.0]);
    }

    #[test]
    fn rejects_shape_mismatch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2], &[1., 2.]);
        let o = h.out(ScalarType::Float, &[3]);
        let e = h.call(super::relu_out, &[x, o, o]).unwrap_err();
        assert!(e.message.contains("static shape"), "{e}");
    }
}
