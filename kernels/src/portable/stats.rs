//! Reductions with indices (max/min over a dim, and over everything), products and variances.
//!
//! They walk the input with reduce.rs's `Plan` (contiguous inputs only). Max/min compare in
//! the input's own values (f64 holds every float dtype exactly, i64 every integer) and copy the
//! winner unchanged; products and variances accumulate in f64 (floats) or wrapping i64
//! (integers), as PyTorch's CPU kernels accumulate float in double.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut};
use rbuild_runtime::{kerr, ScalarType};

use super::reduce::{check_layouts, extreme_position, opt_dims, Plan};
use super::util::{Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::max.dim_max" => max_dim_max,
    "aten::min.dim_min" => min_dim_min,
    "aten::max.unary_out" => max_unary_out,
    "aten::min.unary_out" => min_unary_out,
    "aten::prod.int_out" => prod_int_out,
    "aten::prod.out" => prod_out,
    "aten::var.correction_out" => var_correction_out,
    "aten::var.out" => var_out,
    "aten::var_mean.correction_out" => var_mean_correction_out,
}

fn require_contiguous_out(out: &TensorMut<'_>, what: &str, name: &str) -> KernelResult {
    if out.dim_order.is_contiguous() {
        Ok(())
    } else {
        Err(kerr!("{what}: {name} dim order {:?} is not supported (contiguous only)", out.dim_order))
    }
}

/// PyTorch's `canCast`: no floating → integral and no non-bool → bool conversion.
fn can_cast(from: ScalarType, to: ScalarType) -> bool {
    let float_to_int = from.is_floating() && to.is_integral(false);
    let to_bool = from != ScalarType::Bool && to == ScalarType::Bool;
    !(float_to_int || to_bool)
}

// ---------------------------------------------------------------------------------------------
// max / min
// ---------------------------------------------------------------------------------------------

/// `max.dim_max` / `min.dim_min`: args = [self, dim, keepdim, values, indices, (values,
/// indices)]. Values keep the input dtype; indices are int64, the first extreme among ties
/// (the first NaN for floats, whose value is NaN).
fn extreme_over_dim(args: &KernelArgs<'_>, max: bool) -> KernelResult {
    let what = if max { "max.dim_max" } else { "min.dim_min" };
    let inp = args.tensor(0)?;
    let dim = args.int(1)?;
    let keepdim = args.bool(2)?;
    let mut values = args.out(3)?;
    let mut indices = args.out(4)?;
    check_layouts(&inp, &values, what)?;
    require_contiguous_out(&indices, what, "indices")?;
    if values.dtype != inp.dtype {
        return Err(kerr!("{what}: values dtype {} differs from the input dtype {}", values.dtype, inp.dtype));
    }
    if indices.dtype != ScalarType::Long {
        return Err(kerr!("{what}: indices dtype must be int64, got {}", indices.dtype));
    }
    let p = Plan::new(inp.sizes(), Some(&[dim]), keepdim)?;
    if p.red_offs.is_empty() {
        return Err(kerr!("{what}: cannot reduce over dim {dim} of size 0 (input shape {:?})", inp.sizes()));
    }
    values.resize(&p.out_sizes)?;
    indices.resize(&p.out_sizes)?;
    let x = Elems::of(&inp)?;
    let mut ev = ElemsMut::of(&mut values)?;
    let idx: &mut [i64] = indices.data_mut()?;
    let offs = &p.red_offs;
    p.for_each_group(|g, base| {
        let (k, at) = extreme_position(&x, offs.iter().map(|&r| base + r), max);
        ev.copy_from(g, &x, at);
        idx[g] = k as i64;
    });
    Ok(())
}

/// `max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!)
/// max_values)`.
pub fn max_dim_max(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    extreme_over_dim(args, true)
}

/// `min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!)
/// min_indices)`.
pub fn min_dim_min(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    extreme_over_dim(args, false)
}

/// `max.unary_out` / `min.unary_out(Tensor self, *, Tensor(a!) out)`: the extreme of every
/// element as a 0-dim tensor, cast to the output dtype (PyTorch's `canCast` rule).
fn extreme_of_all(args: &KernelArgs<'_>, max: bool) -> KernelResult {
    let what = if max { "max.unary_out" } else { "min.unary_out" };
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    check_layouts(&inp, &out, what)?;
    if !can_cast(inp.dtype, out.dtype) {
        return Err(kerr!("{what}: cannot cast the {} result to the output dtype {}", inp.dtype, out.dtype));
    }
    if inp.numel() == 0 {
        return Err(kerr!("{what}: the input is empty (shape {:?}); give a dim to reduce over", inp.sizes()));
    }
    out.resize(&[])?;
    let x = Elems::of(&inp)?;
    let (_, at) = extreme_position(&x, 0..inp.numel(), max);
    ElemsMut::of(&mut out)?.copy_from(0, &x, at);
    Ok(())
}

pub fn max_unary_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    extreme_of_all(args, true)
}

pub fn min_unary_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    extreme_of_all(args, false)
}

// ---------------------------------------------------------------------------------------------
// prod
// ---------------------------------------------------------------------------------------------

/// The product of each group in the output dtype's arithmetic (as PyTorch, which casts the
/// input to the result dtype first): f64 for floats, wrapping i64 for integers (the low bits
/// agree with a narrower type's wrapping product), logical and for bool. An empty group is 1.
fn prod_impl(args: &KernelArgs<'_>, dim: Option<i64>, keepdim: bool, dtype: Option<ScalarType>, out: usize) -> KernelResult {
    const WHAT: &str = "prod";
    let inp = args.tensor(0)?;
    let mut out = args.out(out)?;
    check_layouts(&inp, &out, WHAT)?;
    if let Some(dt) = dtype.filter(|&dt| dt != out.dtype) {
        return Err(kerr!("{WHAT}: dtype argument {dt} differs from the output dtype {}", out.dtype));
    }
    // Without a dtype the out= form computes in the output's dtype, as PyTorch's out=
    // overloads do (the graph gives integer and bool inputs an int64 output).
    let p = match dim {
        Some(d) => Plan::new(inp.sizes(), Some(&[d]), keepdim)?,
        None => Plan::new(inp.sizes(), None, false).map(|mut p| {
            p.out_sizes.clear();
            p
        })?,
    };
    out.resize(&p.out_sizes)?;
    let x = Elems::of(&inp)?;
    let out_dtype = out.dtype;
    let mut eo = ElemsMut::of(&mut out)?;
    let offs = &p.red_offs;
    if out_dtype == ScalarType::Bool {
        p.for_each_group(|g, base| eo.set_bool(g, offs.iter().all(|&r| x.bool(base + r))));
    } else if out_dtype.is_floating() {
        p.for_each_group(|g, base| eo.set_f64(g, offs.iter().map(|&r| x.f64(base + r)).product()));
    } else {
        p.for_each_group(|g, base| eo.set_i64(g, offs.iter().fold(1i64, |a, &r| a.wrapping_mul(x.i64(base + r)))));
    }
    Ok(())
}

/// `prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`: args = [self, dim, keepdim, dtype, out, out].
pub fn prod_int_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    prod_impl(args, Some(args.int(1)?), args.bool(2)?, args.opt_scalar_type(3)?, 4)
}

/// `prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`: a 0-dim product of
/// every element.
pub fn prod_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    prod_impl(args, None, false, args.opt_scalar_type(1)?, 2)
}

// ---------------------------------------------------------------------------------------------
// var / var_mean
// ---------------------------------------------------------------------------------------------

/// Variance (and optionally the mean) over `dims` with divisor max(0, n − correction), as
/// PyTorch: n = 0 gives NaN, a divisor of 0 gives NaN or inf. Two passes in f64.
fn variance(args: &KernelArgs<'_>, what: &str, dims: Option<&[i64]>, correction: f64, keepdim: bool, var_out: usize, mean_out: Option<usize>) -> KernelResult {
    let inp = args.tensor(0)?;
    if !inp.dtype.is_floating() {
        return Err(kerr!("{what}: input must be a floating tensor, got {}", inp.dtype));
    }
    let mut var = args.out(var_out)?;
    let mut mean = mean_out.map(|i| args.out(i)).transpose()?;
    let p = Plan::new(inp.sizes(), dims, keepdim)?;
    for (o, name) in [(Some(&mut var), "var output"), (mean.as_mut(), "mean output")] {
        let Some(o) = o else { continue };
        check_layouts(&inp, o, what)?;
        if !o.dtype.is_floating() {
            return Err(kerr!("{what}: {name} must be a floating tensor, got {}", o.dtype));
        }
        o.resize(&p.out_sizes)?;
    }
    let n = p.red_offs.len();
    let divisor = (n as f64 - correction).max(0.0);
    let x = Elems::of(&inp)?;
    let mut ev = ElemsMut::of(&mut var)?;
    let mut em = mean.as_mut().map(ElemsMut::of).transpose()?;
    let offs = &p.red_offs;
    p.for_each_group(|g, base| {
        let m = offs.iter().map(|&r| x.f64(base + r)).sum::<f64>() / n as f64;
        let m2: f64 = offs
            .iter()
            .map(|&r| {
                let d = x.f64(base + r) - m;
                d * d
            })
            .sum();
        ev.set_f64(g, m2 / divisor);
        if let Some(em) = em.as_mut() {
            em.set_f64(g, m);
        }
    });
    Ok(())
}

/// A `Scalar? correction` (None = 1, Bessel's correction).
fn correction_arg(args: &KernelArgs<'_>, i: usize) -> KernelResult<f64> {
    Ok(args.opt_scalar(i)?.map_or(1.0, |c| c.to_f64()))
}

/// `var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool
/// keepdim=False, Tensor(a!) out)`: args = [self, dim, correction, keepdim, out, out].
pub fn var_correction_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let dims = opt_dims(args, 1)?;
    variance(args, "var.correction_out", dims.as_deref(), correction_arg(args, 2)?, args.bool(3)?, 4, None)
}

/// `var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *, Tensor(a!)
/// out)`: args = [self, dim, unbiased, keepdim, out, out].
pub fn var_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let dims = opt_dims(args, 1)?;
    let correction = if args.bool(2)? { 1.0 } else { 0.0 };
    variance(args, "var.out", dims.as_deref(), correction, args.bool(3)?, 4, None)
}

/// `var_mean.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool
/// keepdim=False, Tensor(a!) out0, Tensor(b!) out1)`: args = [self, dim, correction, keepdim,
/// out0 (var), out1 (mean), (out0, out1)].
pub fn var_mean_correction_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let dims = opt_dims(args, 1)?;
    variance(args, "var_mean.correction_out", dims.as_deref(), correction_arg(args, 2)?, args.bool(3)?, 4, Some(5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use half::{bf16, f16};
    use rbuild_runtime::harness::OpHarness;

    fn close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol || (x.is_nan() && y.is_nan()) || x == y, "{a:?} vs {b:?}");
        }
    }

    fn max_dim(h: &mut OpHarness, kernel: rbuild_runtime::kernel::KernelFn, x: u32, dim: i64, keepdim: bool, dtype: ScalarType, sizes: &[usize]) -> Result<(u32, u32), rbuild_runtime::kernel::KernelError> {
        let (d, k) = (h.int(dim), h.bool(keepdim));
        let (v, i) = (h.out(dtype, sizes), h.out(ScalarType::Long, sizes));
        let list = h.tensor_list(&[v, i]);
        h.call(kernel, &[x, d, k, v, i, list]).map(|_| (v, i))
    }

    #[test]
    fn max_min_dim_first_tie_and_nan() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4], &[1., 7., 7., 2., 3., f32::NAN, 9., f32::NAN]);
        let (v, i) = max_dim(&mut h, max_dim_max, x, 1, false, ScalarType::Float, &[2]).unwrap();
        let got = h.read::<f32>(v);
        assert_eq!(got[0], 7.);
        assert!(got[1].is_nan());
        assert_eq!(h.read::<i64>(i), vec![1, 1]);
        let (v, i) = max_dim(&mut h, min_dim_min, x, -1, true, ScalarType::Float, &[2, 1]).unwrap();
        let got = h.read::<f32>(v);
        assert_eq!(got[0], 1.);
        assert!(got[1].is_nan());
        assert_eq!(h.read::<i64>(i), vec![0, 1]);
        // dim 0 (strided), over columns
        let y = h.i64(&[3, 2], &[5, -1, 5, -4, 8, -4]);
        let (v, i) = max_dim(&mut h, min_dim_min, y, 0, false, ScalarType::Long, &[2]).unwrap();
        assert_eq!((h.read::<i64>(v), h.read::<i64>(i)), (vec![5, -4], vec![0, 1]));
        let (v, i) = max_dim(&mut h, max_dim_max, y, 0, false, ScalarType::Long, &[2]).unwrap();
        assert_eq!((h.read::<i64>(v), h.read::<i64>(i)), (vec![8, -1], vec![2, 0]));
    }

    #[test]
    fn max_dim_other_dtypes_and_rank0() {
        let mut h = OpHarness::new();
        let b = h.bool_tensor(&[2, 2], &[false, true, false, false]);
        let (v, i) = max_dim(&mut h, max_dim_max, b, 1, false, ScalarType::Bool, &[2]).unwrap();
        assert_eq!((h.read_bool(v), h.read::<i64>(i)), (vec![true, false], vec![1, 0]));
        let hx = h.tensor::<f16>(ScalarType::Half, &[3], &[1.5, -2., 0.25].map(f16::from_f32));
        let (v, i) = max_dim(&mut h, min_dim_min, hx, 0, false, ScalarType::Half, &[]).unwrap();
        assert_eq!((h.read::<f16>(v)[0].to_f32(), h.read::<i64>(i)), (-2., vec![1]));
        let bx = h.tensor::<bf16>(ScalarType::BFloat16, &[2], &[3., 4.].map(bf16::from_f32));
        let (v, _) = max_dim(&mut h, max_dim_max, bx, -1, true, ScalarType::BFloat16, &[1]).unwrap();
        assert_eq!(h.read::<bf16>(v)[0].to_f32(), 4.);
        let c = h.tensor::<i8>(ScalarType::Char, &[4], &[-3, 100, -128, 100]);
        let (v, i) = max_dim(&mut h, max_dim_max, c, 0, false, ScalarType::Char, &[]).unwrap();
        assert_eq!((h.read::<i8>(v), h.read::<i64>(i)), (vec![100], vec![1]));
        let s = h.f32(&[], &[2.5]);
        let (v, i) = max_dim(&mut h, max_dim_max, s, -1, false, ScalarType::Float, &[]).unwrap();
        assert_eq!((h.read::<f32>(v), h.read::<i64>(i)), (vec![2.5], vec![0]));
        // Empty kept dim: empty results.
        let e = h.f32(&[0, 3], &[]);
        let (v, _) = max_dim(&mut h, max_dim_max, e, 1, false, ScalarType::Float, &[0]).unwrap();
        assert_eq!(h.sizes(v), vec![0]);
    }

    #[test]
    fn max_dim_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0.; 6]);
        assert!(max_dim(&mut h, max_dim_max, x, 2, false, ScalarType::Float, &[2]).is_err());
        assert!(max_dim(&mut h, max_dim_max, x, -3, false, ScalarType::Float, &[2]).is_err());
        assert!(max_dim(&mut h, max_dim_max, x, 1, false, ScalarType::Double, &[2]).is_err());
        assert!(max_dim(&mut h, max_dim_max, x, 1, false, ScalarType::Float, &[3]).is_err());
        let e = h.f32(&[2, 0], &[]);
        let err = max_dim(&mut h, min_dim_min, e, 1, false, ScalarType::Float, &[2]).unwrap_err();
        assert!(err.message.contains("size 0"), "{err}");
        // wrong indices dtype
        let (d, k) = (h.int(1), h.bool(false));
        let (v, i) = (h.out(ScalarType::Float, &[2]), h.out(ScalarType::Int, &[2]));
        let list = h.tensor_list(&[v, i]);
        assert!(h.call(max_dim_max, &[x, d, k, v, i, list]).is_err());
    }

    #[test]
    fn unary_max_min() {
        let mut h = OpHarness::new();
        let x = h.tensor::<i32>(ScalarType::Int, &[2, 2], &[4, -9, 11, 0]);
        let out = h.out(ScalarType::Int, &[]);
        h.call(max_unary_out, &[x, out, out]).unwrap();
        assert_eq!(h.read::<i32>(out), vec![11]);
        let outd = h.out(ScalarType::Double, &[]);
        h.call(min_unary_out, &[x, outd, outd]).unwrap();
        assert_eq!(h.read::<f64>(outd), vec![-9.]);
        let y = h.f32(&[3], &[1., f32::NAN, 5.]);
        let outf = h.out(ScalarType::Float, &[]);
        h.call(max_unary_out, &[y, outf, outf]).unwrap();
        assert!(h.read::<f32>(outf)[0].is_nan());
        let z = h.f32(&[2], &[-0.5, f32::NEG_INFINITY]);
        h.call(min_unary_out, &[z, outf, outf]).unwrap();
        assert_eq!(h.read::<f32>(outf), vec![f32::NEG_INFINITY]);
        // errors: empty input, float → int cast, wrong output shape
        let e = h.f32(&[0], &[]);
        assert!(h.call(max_unary_out, &[e, outf, outf]).is_err());
        let outi = h.out(ScalarType::Long, &[]);
        assert!(h.call(max_unary_out, &[y, outi, outi]).is_err());
        let out2 = h.out(ScalarType::Float, &[2]);
        assert!(h.call(max_unary_out, &[y, out2, out2]).is_err());
    }

    #[test]
    fn prod_variants() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 2., 3., -1., 0.5, 4.]);
        let (d, f, none) = (h.int(1), h.bool(false), h.none());
        let out = h.out(ScalarType::Float, &[2]);
        h.call(prod_int_out, &[x, d, f, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![6., -2.]);
        let d0 = h.int(0);
        let t = h.bool(true);
        let out0 = h.out(ScalarType::Float, &[1, 3]);
        h.call(prod_int_out, &[x, d0, t, none, out0, out0]).unwrap();
        assert_eq!(h.read::<f32>(out0), vec![-1., 1., 12.]);
        // all elements, int32 → int64, and an explicit double dtype
        let i = h.tensor::<i32>(ScalarType::Int, &[4], &[2, -3, 5, 7]);
        let outl = h.out(ScalarType::Long, &[]);
        h.call(prod_out, &[i, none, outl, outl]).unwrap();
        assert_eq!(h.read::<i64>(outl), vec![-210]);
        let dt = h.scalar_type(ScalarType::Double);
        let outd = h.out(ScalarType::Double, &[]);
        h.call(prod_out, &[x, dt, outd, outd]).unwrap();
        assert_eq!(h.read::<f64>(outd), vec![-12.]);
        // bool input: int64 product; an empty reduced dim gives 1
        let b = h.bool_tensor(&[2], &[true, false]);
        h.call(prod_out, &[b, none, outl, outl]).unwrap();
        assert_eq!(h.read::<i64>(outl), vec![0]);
        let e = h.f32(&[2, 0], &[]);
        let oute = h.out(ScalarType::Float, &[2]);
        h.call(prod_int_out, &[e, d, f, none, oute, oute]).unwrap();
        assert_eq!(h.read::<f32>(oute), vec![1., 1.]);
        // int64 wrapping as in PyTorch
        let big = h.i64(&[2], &[1 << 62, 4]);
        h.call(prod_out, &[big, none, outl, outl]).unwrap();
        assert_eq!(h.read::<i64>(outl), vec![0]);
    }

    #[test]
    fn prod_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1.; 6]);
        let (d, f, none) = (h.int(2), h.bool(false), h.none());
        let out = h.out(ScalarType::Float, &[2]);
        assert!(h.call(prod_int_out, &[x, d, f, none, out, out]).is_err());
        let dt = h.scalar_type(ScalarType::Double);
        let outf = h.out(ScalarType::Float, &[]);
        assert!(h.call(prod_out, &[x, dt, outf, outf]).is_err());
        let outl = h.out(ScalarType::Long, &[2]);
        assert!(h.call(prod_out, &[x, none, outl, outl]).is_err());
    }

    fn var_call(h: &mut OpHarness, x: u32, dims: Option<&[i64]>, correction: Option<f64>, keepdim: bool, sizes: &[usize]) -> Result<u32, rbuild_runtime::kernel::KernelError> {
        let d = match dims {
            Some(d) => h.int_list(d),
            None => h.none(),
        };
        let c = match correction {
            Some(c) => h.double(c),
            None => h.none(),
        };
        let k = h.bool(keepdim);
        let out = h.out(ScalarType::Float, sizes);
        h.call(var_correction_out, &[x, d, c, k, out, out]).map(|_| out)
    }

    fn read_f64(h: &OpHarness, id: u32) -> Vec<f64> {
        h.read::<f32>(id).iter().map(|&v| v as f64).collect()
    }

    #[test]
    fn var_corrections_and_dims() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4], &[1., 2., 3., 4., 2., 2., 2., 2.]);
        let o = var_call(&mut h, x, Some(&[1]), None, false, &[2]).unwrap();
        close(&read_f64(&h, o), &[5. / 3., 0.], 1e-6);
        let o = var_call(&mut h, x, Some(&[-1]), Some(0.), true, &[2, 1]).unwrap();
        close(&read_f64(&h, o), &[1.25, 0.], 1e-6);
        // All dims (None and []), mean 2.25, sum of squares 5.5
        let o = var_call(&mut h, x, None, Some(2.), false, &[]).unwrap();
        close(&read_f64(&h, o), &[5.5 / 6.], 1e-6);
        let o = var_call(&mut h, x, Some(&[]), Some(0.), false, &[]).unwrap();
        close(&read_f64(&h, o), &[5.5 / 8.], 1e-6);
        // dim 0 over columns; n = 2 with correction 2: divisor 0 → inf or NaN
        let o = var_call(&mut h, x, Some(&[0]), Some(2.), false, &[4]).unwrap();
        let got = h.read::<f32>(o);
        assert!(got[0].is_infinite() && got[1].is_nan(), "{got:?}");
        // single element, default correction: NaN
        let s = h.f32(&[1], &[3.]);
        let o = var_call(&mut h, s, None, None, false, &[]).unwrap();
        assert!(h.read::<f32>(o)[0].is_nan());
    }

    #[test]
    fn var_out_unbiased_flag_and_dtypes() {
        let mut h = OpHarness::new();
        let x = h.tensor::<f64>(ScalarType::Double, &[3, 2], &[1., 10., 3., 20., 5., 30.]);
        let (d, t, f) = (h.int_list(&[0]), h.bool(true), h.bool(false));
        let out = h.out(ScalarType::Double, &[2]);
        h.call(var_out, &[x, d, t, f, out, out]).unwrap();
        close(&h.read::<f64>(out), &[4., 100.], 1e-12);
        h.call(var_out, &[x, d, f, f, out, out]).unwrap();
        close(&h.read::<f64>(out), &[8. / 3., 200. / 3.], 1e-12);
        let hx = h.tensor::<f16>(ScalarType::Half, &[4], &[1., 2., 3., 4.].map(f16::from_f32));
        let none = h.none();
        let outh = h.out(ScalarType::Half, &[]);
        h.call(var_out, &[hx, none, t, f, outh, outh]).unwrap();
        assert!((h.read::<f16>(outh)[0].to_f32() - 5. / 3.).abs() < 1e-3);
        // errors: integer input, integer output, bad dim, repeated dim
        let i = h.i64(&[2], &[1, 2]);
        assert!(h.call(var_out, &[i, none, t, f, out, out]).is_err());
        let outl = h.out(ScalarType::Long, &[2]);
        assert!(h.call(var_out, &[x, d, t, f, outl, outl]).is_err());
        let bad = h.int_list(&[2]);
        assert!(h.call(var_out, &[x, bad, t, f, out, out]).is_err());
        let rep = h.int_list(&[0, -2]);
        assert!(h.call(var_out, &[x, rep, t, f, out, out]).is_err());
    }

    #[test]
    fn var_mean_both_outputs() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 2., 6., -1., -1., -1.]);
        let (d, c, f) = (h.int_list(&[1]), h.none(), h.bool(false));
        let (v, m) = (h.out(ScalarType::Float, &[2]), h.out(ScalarType::Float, &[2]));
        let list = h.tensor_list(&[v, m]);
        h.call(var_mean_correction_out, &[x, d, c, f, v, m, list]).unwrap();
        close(&read_f64(&h, v), &[7., 0.], 1e-6);
        close(&read_f64(&h, m), &[3., -1.], 1e-6);
        // empty input: NaN mean and variance
        let e = h.f32(&[0], &[]);
        let none = h.none();
        let (v0, m0) = (h.out(ScalarType::Float, &[]), h.out(ScalarType::Float, &[]));
        let list0 = h.tensor_list(&[v0, m0]);
        h.call(var_mean_correction_out, &[e, none, c, f, v0, m0, list0]).unwrap();
        assert!(h.read::<f32>(v0)[0].is_nan() && h.read::<f32>(m0)[0].is_nan());
        // mean output of the wrong shape
        let m1 = h.out(ScalarType::Float, &[3]);
        let list1 = h.tensor_list(&[v, m1]);
        assert!(h.call(var_mean_correction_out, &[x, d, c, f, v, m1, list1]).is_err());
    }
}
