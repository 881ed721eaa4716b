//! `quantized_decomposed` affine (de)quantization, per tensor and per channel.
//!
//! Arithmetic follows ExecuTorch's quantized kernels bit for bit:
//! - quantize: `q = clamp(float(zp) + nearbyint(float(x * (1.0f / float(scale)))), qmin, qmax)`,
//!   the product in f32 (f64 for Double inputs), rounding half to even;
//! - dequantize: `x = float(q - zp) * float(scale)`, then cast to the output dtype.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "quantized_decomposed::quantize_per_tensor.out" => quantize_per_tensor_out,
    "quantized_decomposed::quantize_per_tensor.tensor_out" => quantize_per_tensor_tensor_out,
    "quantized_decomposed::quantize_per_channel.out" => quantize_per_channel_out,
    "quantized_decomposed::dequantize_per_tensor.out" => dequantize_per_tensor_out,
    "quantized_decomposed::dequantize_per_tensor.tensor_out" => dequantize_per_tensor_tensor_out,
    "quantized_decomposed::dequantize_per_channel.out" => dequantize_per_channel_out,
}

/// Value range of a quantized integer dtype.
fn int_range(dtype: ScalarType) -> Option<(i64, i64)> {
    Some(match dtype {
        ScalarType::Byte => (0, u8::MAX as i64),
        ScalarType::Char => (i8::MIN as i64, i8::MAX as i64),
        ScalarType::Short => (i16::MIN as i64, i16::MAX as i64),
        ScalarType::UInt16 | ScalarType::Bits16 => (0, u16::MAX as i64),
        ScalarType::Int => (i32::MIN as i64, i32::MAX as i64),
        _ => return None,
    })
}

fn check_quant_range(dtype: ScalarType, qmin: i64, qmax: i64, what: &str) -> KernelResult {
    let (lo, hi) = int_range(dtype).ok_or_else(|| kerr!("{what}: {dtype} is not a supported quantized dtype"))?;
    if qmin > qmax || qmin < lo || qmax > hi {
        return Err(kerr!("{what}: quant range [{qmin}, {qmax}] is invalid for {dtype} ([{lo}, {hi}])"));
    }
    Ok(())
}

fn check_layouts(inp: &TensorRef<'_>, out: &TensorMut<'_>, what: &str) -> KernelResult {
    require_contiguous(inp, what)?;
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order));
    }
    Ok(())
}

/// A one-element scale tensor (Double or Float) as f64.
fn scalar_scale(t: &TensorRef<'_>, what: &str) -> KernelResult<f64> {
    if t.numel() != 1 || !t.dtype.is_floating() {
        return Err(kerr!("{what}: scale must be a one-element floating tensor, got {} {:?}", t.dtype, t.sizes()));
    }
    Ok(Elems::of(t)?.f64(0))
}

/// A one-element zero-point tensor (Long or Int) as i64.
fn scalar_zero_point(t: &TensorRef<'_>, what: &str) -> KernelResult<i64> {
    if t.numel() != 1 || !t.dtype.is_integral(false) {
        return Err(kerr!("{what}: zero_point must be a one-element integer tensor, got {} {:?}", t.dtype, t.sizes()));
    }
    Ok(Elems::of(t)?.i64(0))
}

// ---------------------------------------------------------------------------------------------
// Quantize
// ---------------------------------------------------------------------------------------------

/// Round half to even (C's `nearbyint` in the default rounding mode).
#[inline]
fn round_half_even(v: f32) -> f32 {
    // Adding and removing 1.5 * 2^23 leaves an integer rounded ties-to-even, exactly for
    // |v| < 2^22; far cheaper than the bit-level libm routine, which covers the rest (and NaN).
    const MAGIC: f32 = 12_582_912.0;
    if v > -4_194_304.0 && v < 4_194_304.0 {
        (v + MAGIC) - MAGIC
    } else {
        libm::roundevenf(v)
    }
}

/// ExecuTorch's `quantize_val` after the scaling: `scaled` is `float(x * inv_scale)`.
#[inline]
fn quantize_scaled(scaled: f32, zp: i64, qmin: i64, qmax: i64) -> i64 {
    // int32 zero point + float → float, then truncation to int64 (exact for in-range values).
    let q = (zp as i32 as f32 + round_half_even(scaled)) as i64;
    q.clamp(qmin, qmax)
}

/// `float(x * inv_scale)` with the intermediate precision of the input dtype.
#[inline]
fn scale_input(x: &Elems<'_>, i: usize, inv: f32) -> f32 {
    match x {
        Elems::F64(s) => (inv as f64 * s[i]) as f32,
        Elems::F32(s) => inv * s[i],
        _ => inv * x.f64(i) as f32,
    }
}

/// Quantizes `x[i]` for every `i` with the parameters of `param_of(i)` = (inv_scale, zero_point).
fn quantize_into(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, qmin: i64, qmax: i64, param_of: impl Fn(usize) -> (f32, i64)) -> KernelResult {
    let x = Elems::of(inp)?;
    match (&x, out.dtype) {
        (Elems::F32(xs), ScalarType::Char) => {
            let o: &mut [i8] = out.data_mut()?;
            for (i, (ov, &xv)) in o.iter_mut().zip(xs.iter()).enumerate() {
                let (inv, zp) = param_of(i);
                *ov = quantize_scaled(inv * xv, zp, qmin, qmax) as i8;
            }
        }
        (Elems::F32(xs), ScalarType::Byte) => {
            let o: &mut [u8] = out.data_mut()?;
            for (i, (ov, &xv)) in o.iter_mut().zip(xs.iter()).enumerate() {
                let (inv, zp) = param_of(i);
                *ov = quantize_scaled(inv * xv, zp, qmin, qmax) as u8;
            }
        }
        _ => {
            let mut eo = ElemsMut::of(out)?;
            for i in 0..x.len() {
                let (inv, zp) = param_of(i);
                eo.set_i64(i, quantize_scaled(scale_input(&x, i, inv), zp, qmin, qmax));
            }
        }
    }
    Ok(())
}

/// Common checks of a quantize call; resizes `out` to the input's shape.
fn prepare_quantize(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, qmin: i64, qmax: i64, dtype: ScalarType, what: &str) -> KernelResult {
    check_layouts(inp, out, what)?;
    if !inp.dtype.is_floating() {
        return Err(kerr!("{what}: input must be floating, got {}", inp.dtype));
    }
    if out.dtype != dtype {
        return Err(kerr!("{what}: output dtype {} differs from the dtype argument {dtype}", out.dtype));
    }
    check_quant_range(dtype, qmin, qmax, what)?;
    out.resize(inp.sizes())
}

fn quantize_per_tensor_impl(args: &KernelArgs<'_>, scale: f64, zp: i64, what: &str) -> KernelResult {
    let inp = args.tensor(0)?;
    let (qmin, qmax, dtype) = (args.int(3)?, args.int(4)?, args.scalar_type(5)?);
    let mut out = args.out(6)?;
    prepare_quantize(&inp, &mut out, qmin, qmax, dtype, what)?;
    let inv = 1.0f32 / scale as f32;
    quantize_into(&inp, &mut out, qmin, qmax, |_| (inv, zp))
}

/// `quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
/// int quant_max, ScalarType dtype, *, Tensor(a!) out)`: args = [input, scale, zero_point,
/// quant_min, quant_max, dtype, out, out].
pub fn quantize_per_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    quantize_per_tensor_impl(args, args.double(1)?, args.int(2)?, "quantize_per_tensor")
}

/// `quantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point, int quant_min,
/// int quant_max, ScalarType dtype, *, Tensor(a!) out)`.
pub fn quantize_per_tensor_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "quantize_per_tensor.tensor";
    let scale = scalar_scale(&args.tensor(1)?, WHAT)?;
    let zp = scalar_zero_point(&args.tensor(2)?, WHAT)?;
    quantize_per_tensor_impl(args, scale, zp, WHAT)
}

/// Per-channel parameters along `axis` of `inp`: (outer, channels, inner) and the channel of
/// flat index `i` is `(i / inner) % channels`.
fn channel_layout(inp: &TensorRef<'_>, axis: i64, n_params: usize, what: &str) -> KernelResult<usize> {
    if inp.dim() == 0 {
        return Err(kerr!("{what}: per-channel quantization needs at least one dim"));
    }
    let a = normalize_dim(axis, inp.dim())?;
    if inp.sizes()[a] != n_params {
        return Err(kerr!("{what}: {n_params} scales for axis {a} of size {} (input {:?})", inp.sizes()[a], inp.sizes()));
    }
    Ok(inp.sizes()[a + 1..].iter().product())
}

fn float_params(t: &TensorRef<'_>, what: &str) -> KernelResult<Vec<f32>> {
    if !t.dtype.is_floating() {
        return Err(kerr!("{what}: scales must be floating, got {}", t.dtype));
    }
    let e = Elems::of(t)?;
    Ok((0..e.len()).map(|i| e.f64(i) as f32).collect())
}

fn int_params(t: &TensorRef<'_>, what: &str) -> KernelResult<Vec<i64>> {
    if !t.dtype.is_integral(false) {
        return Err(kerr!("{what}: zero_points must be integer, got {}", t.dtype));
    }
    let e = Elems::of(t)?;
    Ok((0..e.len()).map(|i| e.i64(i)).collect())
}

/// `quantize_per_channel.out(Tensor input, Tensor scales, Tensor zero_points, int axis,
/// int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out)`.
pub fn quantize_per_channel_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "quantize_per_channel";
    let inp = args.tensor(0)?;
    let scales = float_params(&args.tensor(1)?, WHAT)?;
    let zps = int_params(&args.tensor(2)?, WHAT)?;
    let (qmin, qmax, dtype) = (args.int(4)?, args.int(5)?, args.scalar_type(6)?);
    let mut out = args.out(7)?;
    if zps.len() != scales.len() {
        return Err(kerr!("{WHAT}: {} zero points for {} scales", zps.len(), scales.len()));
    }
    let inner = channel_layout(&inp, args.int(3)?, scales.len(), WHAT)?;
    prepare_quantize(&inp, &mut out, qmin, qmax, dtype, WHAT)?;
    let inv: Vec<f32> = scales.iter().map(|&s| 1.0f32 / s).collect();
    let c = scales.len();
    quantize_into(&inp, &mut out, qmin, qmax, |i| {
        let ch = (i / inner) % c;
        (inv[ch], zps[ch])
    })
}

// ---------------------------------------------------------------------------------------------
// Dequantize
// ---------------------------------------------------------------------------------------------

/// Dequantizes `q[i]` with `param_of(i)` = (scale as f32, zero point).
fn dequantize_into(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, param_of: impl Fn(usize) -> (f32, i64)) -> KernelResult {
    let q = Elems::of(inp)?;
    let val = |i: usize, qv: i64| {
        let (s, zp) = param_of(i);
        (qv - zp as i32 as i64) as f32 * s
    };
    match (&q, out.dtype) {
        (Elems::I8(qs), ScalarType::Float) => {
            let o: &mut [f32] = out.data_mut()?;
            for (i, (ov, &qv)) in o.iter_mut().zip(qs.iter()).enumerate() {
                *ov = val(i, qv as i64);
            }
        }
        (Elems::U8(qs), ScalarType::Float) => {
            let o: &mut [f32] = out.data_mut()?;
            for (i, (ov, &qv)) in o.iter_mut().zip(qs.iter()).enumerate() {
                *ov = val(i, qv as i64);
            }
        }
        _ => {
            let mut eo = ElemsMut::of(out)?;
            for i in 0..q.len() {
                eo.set_f64(i, val(i, q.i64(i)) as f64);
            }
        }
    }
    Ok(())
}

/// Common checks of a dequantize call. `out_dtype` is the optional keyword argument, present
/// when the call has one more argument than the minimal form.
fn prepare_dequantize(args: &KernelArgs<'_>, inp: &TensorRef<'_>, out: &mut TensorMut<'_>, first_int: usize, what: &str) -> KernelResult {
    let (qmin, qmax, dtype) = (args.int(first_int)?, args.int(first_int + 1)?, args.scalar_type(first_int + 2)?);
    check_layouts(inp, out, what)?;
    if inp.dtype != dtype {
        return Err(kerr!("{what}: input dtype {} differs from the dtype argument {dtype}", inp.dtype));
    }
    if int_range(inp.dtype).is_none() {
        return Err(kerr!("{what}: {} is not a supported quantized input dtype", inp.dtype));
    }
    if qmin > qmax {
        return Err(kerr!("{what}: quant_min {qmin} exceeds quant_max {qmax}"));
    }
    // out_dtype sits right before the [out, out] pair when the schema has it.
    let out_dtype_at = first_int + 3;
    if args.len() == out_dtype_at + 3 {
        if let Some(dt) = args.opt_scalar_type(out_dtype_at)? {
            if dt != out.dtype {
                return Err(kerr!("{what}: out_dtype {dt} differs from the output dtype {}", out.dtype));
            }
        }
    }
    if !out.dtype.is_floating() {
        return Err(kerr!("{what}: output must be floating, got {}", out.dtype));
    }
    out.resize(inp.sizes())
}

/// The output is always the last argument (it is repeated after the schema's arguments).
fn last_out<'a>(args: &KernelArgs<'a>) -> KernelResult<TensorMut<'a>> {
    args.out(args.len().checked_sub(1).ok_or_else(|| kerr!("no arguments"))?)
}

/// `dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
/// int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)`:
/// args = [input, scale, zero_point, quant_min, quant_max, dtype, out_dtype, out, out].
pub fn dequantize_per_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "dequantize_per_tensor";
    let inp = args.tensor(0)?;
    let (scale, zp) = (args.double(1)? as f32, args.int(2)?);
    let mut out = last_out(args)?;
    prepare_dequantize(args, &inp, &mut out, 3, WHAT)?;
    dequantize_into(&inp, &mut out, |_| (scale, zp))
}

/// `dequantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point,
/// int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)`.
pub fn dequantize_per_tensor_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "dequantize_per_tensor.tensor";
    let inp = args.tensor(0)?;
    let scale = scalar_scale(&args.tensor(1)?, WHAT)? as f32;
    let zp = scalar_zero_point(&args.tensor(2)?, WHAT)?;
    let mut out = last_out(args)?;
    prepare_dequantize(args, &inp, &mut out, 3, WHAT)?;
    dequantize_into(&inp, &mut out, |_| (scale, zp))
}

/// `dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis,
/// int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)`:
/// args = [input, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype, out, out].
pub fn dequantize_per_channel_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "dequantize_per_channel";
    let inp = args.tensor(0)?;
    let scales = float_params(&args.tensor(1)?, WHAT)?;
    let zps = match args.opt_tensor(2)? {
        Some(t) => int_params(&t, WHAT)?,
        None => alloc::vec![0; scales.len()],
    };
    if zps.len() != scales.len() {
        return Err(kerr!("{WHAT}: {} zero points for {} scales", zps.len(), scales.len()));
    }
    let inner = channel_layout(&inp, args.int(3)?, scales.len(), WHAT)?;
    let mut out = last_out(args)?;
    prepare_dequantize(args, &inp, &mut out, 4, WHAT)?;
    let c = scales.len();
    dequantize_into(&inp, &mut out, |i| {
        let ch = (i / inner) % c;
        (scales[ch], zps[ch])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    /// Independent reference: round half to even in f32, as C's nearbyint does.
    fn reference_q(x: f32, scale: f64, zp: i64, lo: i64, hi: i64) -> i64 {
        let v = x * (1.0f32 / scale as f32);
        let f = v.floor();
        let r = if v - f > 0.5 || (v - f == 0.5 && (f as i64) % 2 != 0) { f + 1.0 } else { f };
        (r as i64 + zp).clamp(lo, hi)
    }

    #[test]
    fn quantize_int8_ties_to_even_and_saturates() {
        let mut h = OpHarness::new();
        // 0.5/1 and 2.5/1 tie: they round to 0 and 2; ±200 saturate.
        let data = [0.5f32, 1.5, 2.5, -0.5, -1.5, 200., -200., 0.26];
        let x = h.f32(&[8], &data);
        let (s, zp, lo, hi, dt) = (h.double(1.0), h.int(0), h.int(-128), h.int(127), h.scalar_type(ScalarType::Char));
        let out = h.out(ScalarType::Char, &[8]);
        h.call(quantize_per_tensor_out, &[x, s, zp, lo, hi, dt, out, out]).unwrap();
        assert_eq!(h.read::<i8>(out), vec![0, 2, 2, 0, -2, 127, -128, 0]);
    }

    #[test]
    fn fast_rounding_agrees_with_libm() {
        let mut v = -5_000_000.0f32;
        while v < 5_000_000.0 {
            for d in [0.0f32, 0.25, 0.5, 0.75] {
                let x = v + d;
                assert_eq!(round_half_even(x), libm::roundevenf(x), "{x}");
            }
            v += 977.0;
        }
        for x in [0.5f32, 1.5, 2.5, -0.5, -2.5, 4_194_303.5, -4_194_302.5, 1e10, f32::INFINITY] {
            assert_eq!(round_half_even(x), libm::roundevenf(x), "{x}");
        }
        assert!(round_half_even(f32::NAN).is_nan());
    }

    #[test]
    fn quantize_uint8_matches_reference() {
        let mut h = OpHarness::new();
        let data: Vec<f32> = (0..50).map(|i| (i as f32 - 25.0) * 0.37).collect();
        let x = h.f32(&[5, 10], &data);
        let (s, zp, lo, hi, dt) = (h.double(0.1), h.int(128), h.int(0), h.int(255), h.scalar_type(ScalarType::Byte));
        let out = h.out(ScalarType::Byte, &[5, 10]);
        h.call(quantize_per_tensor_out, &[x, s, zp, lo, hi, dt, out, out]).unwrap();
        let want: Vec<u8> = data.iter().map(|&v| reference_q(v, 0.1, 128, 0, 255) as u8).collect();
        assert_eq!(h.read::<u8>(out), want);
    }

    #[test]
    fn quantize_rejects_dtype_mismatch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1], &[0.]);
        let (s, zp, lo, hi, dt) = (h.double(0.1), h.int(0), h.int(-128), h.int(127), h.scalar_type(ScalarType::Char));
        let out = h.out(ScalarType::Byte, &[1]);
        let e = h.call(quantize_per_tensor_out, &[x, s, zp, lo, hi, dt, out, out]).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
    }

    #[test]
    fn quantize_tensor_args_and_per_channel() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 2], &[1.0, -1.0, 3.0, 6.0]);
        let s = h.tensor::<f64>(ScalarType::Double, &[1], &[0.5]);
        let zp = h.i64(&[1], &[1]);
        let (lo, hi, dt) = (h.int(-128), h.int(127), h.scalar_type(ScalarType::Char));
        let out = h.out(ScalarType::Char, &[2, 2]);
        h.call(quantize_per_tensor_tensor_out, &[x, s, zp, lo, hi, dt, out, out]).unwrap();
        assert_eq!(h.read::<i8>(out), vec![3, -1, 7, 13]);

        // per channel along axis 1: scales [0.5, 2], zero points [0, -1]
        let scales = h.tensor::<f64>(ScalarType::Double, &[2], &[0.5, 2.0]);
        let zps = h.i64(&[2], &[0, -1]);
        let axis = h.int(1);
        let out2 = h.out(ScalarType::Char, &[2, 2]);
        h.call(quantize_per_channel_out, &[x, scales, zps, axis, lo, hi, dt, out2, out2]).unwrap();
        // [1/0.5, -1/2 - 1, 3/0.5, 6/2 - 1] with -0.5 rounding to -0 -> -1
        assert_eq!(h.read::<i8>(out2), vec![2, -1, 6, 2]);
    }

    #[test]
    fn dequantize_per_tensor_int8_and_uint8() {
        let mut h = OpHarness::new();
        let q = h.tensor::<i8>(ScalarType::Char, &[4], &[-128, 3, 4, 127]);
        let (s, zp, lo, hi, dt, none) = (h.double(0.05), h.int(3), h.int(-128), h.int(127), h.scalar_type(ScalarType::Char), h.none());
        let out = h.out(ScalarType::Float, &[4]);
        h.call(dequantize_per_tensor_out, &[q, s, zp, lo, hi, dt, none, out, out]).unwrap();
        let sf = 0.05f64 as f32;
        assert_eq!(h.read::<f32>(out), vec![-131. * sf, 0., sf, 124. * sf]);

        let qu = h.tensor::<u8>(ScalarType::Byte, &[2], &[0, 255]);
        let (s2, zp2, lo2, hi2, dt2) = (h.double(0.1), h.int(128), h.int(0), h.int(255), h.scalar_type(ScalarType::Byte));
        let fdt = h.scalar_type(ScalarType::Double);
        let out2 = h.out(ScalarType::Double, &[2]);
        h.call(dequantize_per_tensor_out, &[qu, s2, zp2, lo2, hi2, dt2, fdt, out2, out2]).unwrap();
        let s2f = 0.1f64 as f32;
        assert_eq!(h.read::<f64>(out2), vec![(-128. * s2f) as f64, (127. * s2f) as f64]);

        // Wrong input dtype for the dtype argument.
        let e = h.call(dequantize_per_tensor_out, &[qu, s, zp, lo, hi, dt, none, out2, out2]).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
    }

    #[test]
    fn dequantize_per_channel_axis1_with_and_without_zero_points() {
        let mut h = OpHarness::new();
        // [N=2, C=2, 2]
        let q = h.tensor::<i8>(ScalarType::Char, &[2, 2, 2], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let scales = h.f32(&[2], &[0.5, 0.25]);
        let zps = h.i64(&[2], &[1, -4]);
        let (axis, lo, hi, dt, none) = (h.int(1), h.int(-128), h.int(127), h.scalar_type(ScalarType::Char), h.none());
        let out = h.out(ScalarType::Float, &[2, 2, 2]);
        h.call(dequantize_per_channel_out, &[q, scales, zps, axis, lo, hi, dt, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0.5, 1.75, 2., 2., 2.5, 2.75, 3.]);
        let out2 = h.out(ScalarType::Float, &[2, 2, 2]);
        h.call(dequantize_per_channel_out, &[q, scales, none, axis, lo, hi, dt, none, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![0.5, 1., 0.75, 1., 2.5, 3., 1.75, 2.]);
        let bad_axis = h.int(3);
        assert!(h.call(dequantize_per_channel_out, &[q, scales, none, bad_axis, lo, hi, dt, none, out2, out2]).is_err());
    }
}
