//! Matrix products: `mm`, `bmm`, `addmm` (and their `dtype_out` overloads).
//!
//! Plain reference loops over dtype-erased elements: f32 outputs accumulate in f32 in
//! ExecuTorch's portable order (bit for bit its `vec_matmul`/`vec_addmm`), other floating outputs
//! in f64, integer outputs in wrapping i64. The optimized module replaces the f32 cases with GEMM.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, Scalar, ScalarType};

use super::util::{broadcast_strides, require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::mm.out" => mm_out,
    "aten::mm.dtype_out" => mm_dtype_out,
    "aten::bmm.out" => bmm_out,
    "aten::bmm.dtype_out" => bmm_dtype_out,
    "aten::addmm.out" => addmm_out,
    "aten::addmm.dtype_out" => addmm_dtype_out,
}

/// Sizes of a (batched) product `[batch, n, k] @ [batch, k, m]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatDims {
    pub batch: usize,
    pub n: usize,
    pub k: usize,
    pub m: usize,
}

/// Checks `a @ b` for 2-D (`batched == false`) or 3-D operands and returns the dims.
pub(crate) fn mat_dims(a: &TensorRef<'_>, b: &TensorRef<'_>, batched: bool) -> KernelResult<MatDims> {
    let rank = if batched { 3 } else { 2 };
    if a.dim() != rank || b.dim() != rank {
        return Err(kerr!(
            "expected {rank}-D operands, got shapes {:?} and {:?}",
            a.sizes(),
            b.sizes()
        ));
    }
    let (sa, sb) = (a.sizes(), b.sizes());
    let batch = if batched { sa[0] } else { 1 };
    if batched && sb[0] != batch {
        return Err(kerr!("batch sizes differ: {sa:?} and {sb:?}"));
    }
    let (n, k, k2, m) = (sa[rank - 2], sa[rank - 1], sb[rank - 2], sb[rank - 1]);
    if k != k2 {
        return Err(kerr!("cannot multiply shapes {sa:?} and {sb:?}: inner sizes {k} and {k2} differ"));
    }
    Ok(MatDims { batch, n, k, m })
}

/// The result shape of a product.
pub(crate) fn result_sizes(d: MatDims, batched: bool) -> Vec<usize> {
    if batched {
        alloc::vec![d.batch, d.n, d.m]
    } else {
        alloc::vec![d.n, d.m]
    }
}

/// Input dtypes must match each other and, unless `dtype_out`, the output.
fn check_dtypes(tensors: &[&TensorRef<'_>], out: ScalarType, dtype_out: bool) -> KernelResult {
    let first = tensors[0].dtype;
    for t in tensors {
        if t.dtype != first {
            return Err(kerr!("operand dtypes differ: {} and {}", first, t.dtype));
        }
        require_contiguous(t, "matrix operand")?;
    }
    if !dtype_out && out != first {
        return Err(kerr!("out dtype {out} does not match operand dtype {first}"));
    }
    if first == ScalarType::Bool || out == ScalarType::Bool {
        return Err(kerr!("matrix products are not supported for Bool"));
    }
    Ok(())
}

/// `mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)`: args = [self, mat2, out, out].
pub fn mm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    product(args, 0, 1, None, 2, false, false)
}

/// `mm.dtype_out(Tensor self, Tensor mat2, ScalarType out_dtype, *, Tensor(a!) out)`.
pub fn mm_dtype_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    check_out_dtype(args, 2, 3)?;
    product(args, 0, 1, None, 3, false, true)
}

/// `bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)`: args = [self, mat2, out, out].
pub fn bmm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if cfg!(feature = "complex") && super::complex_arith::is_complex(args.tensor(0)?.dtype) {
        return super::complex_arith::bmm(args);
    }
    product(args, 0, 1, None, 2, true, false)
}

/// `bmm.dtype_out(Tensor self, Tensor mat2, ScalarType out_dtype, *, Tensor(a!) out)`.
pub fn bmm_dtype_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    check_out_dtype(args, 2, 3)?;
    product(args, 0, 1, None, 3, true, true)
}

/// `addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
/// Tensor(a!) out)`: args = [self, mat1, mat2, beta, alpha, out, out].
pub fn addmm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (beta, alpha) = (args.scalar(3)?, args.scalar(4)?);
    product(args, 1, 2, Some((0, beta, alpha)), 5, false, false)
}

/// `addmm.dtype_out(self, mat1, mat2, ScalarType out_dtype, *, beta, alpha, out)`:
/// args = [self, mat1, mat2, out_dtype, beta, alpha, out, out].
pub fn addmm_dtype_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    check_out_dtype(args, 3, 6)?;
    let (beta, alpha) = (args.scalar(4)?, args.scalar(5)?);
    product(args, 1, 2, Some((0, beta, alpha)), 6, false, true)
}

/// The dtype of output argument `i`, read without borrowing its memory.
pub(crate) fn out_dtype(args: &KernelArgs<'_>, i: usize) -> KernelResult<ScalarType> {
    args.value(i)?.as_tensor().map(|t| t.dtype).ok_or_else(|| kerr!("argument {i}: expected an out Tensor"))
}

fn check_out_dtype(args: &KernelArgs<'_>, dtype_arg: usize, out: usize) -> KernelResult {
    let want = args.scalar_type(dtype_arg)?;
    let got = out_dtype(args, out)?;
    if want != got {
        return Err(kerr!("out_dtype is {want} but out has dtype {got}"));
    }
    Ok(())
}

/// Strides (elements) to read the addmm bias `self` broadcast to `[n, m]`.
pub(crate) fn bias_strides(bias: &TensorRef<'_>, n: usize, m: usize) -> KernelResult<(usize, usize)> {
    if bias.dim() > 2 {
        return Err(kerr!("addmm: self of shape {:?} cannot be broadcast to [{n}, {m}]", bias.sizes()));
    }
    let s = broadcast_strides(bias.sizes(), &[n, m])?;
    Ok((s[0], s[1]))
}

/// `out[b] = beta * bias + alpha * (a[b] @ b[b])`, or the plain product without `addmm`.
fn product(
    args: &KernelArgs<'_>,
    ia: usize,
    ib: usize,
    addmm: Option<(usize, Scalar, Scalar)>,
    iout: usize,
    batched: bool,
    dtype_out: bool,
) -> KernelResult {
    let (ta, tb) = (args.tensor(ia)?, args.tensor(ib)?);
    let d = mat_dims(&ta, &tb, batched)?;
    let bias = match addmm {
        Some((i, beta, alpha)) => {
            let t = args.tensor(i)?;
            check_dtypes(&[&ta, &tb, &t], out_dtype(args, iout)?, dtype_out)?;
            Some((t, bias_strides(&t, d.n, d.m)?, beta, alpha))
        }
        None => {
            check_dtypes(&[&ta, &tb], out_dtype(args, iout)?, dtype_out)?;
            None
        }
    };
    let mut out: TensorMut<'_> = args.out(iout)?;
    out.resize(&result_sizes(d, batched))?;
    let (ea, eb) = (Elems::of(&ta)?, Elems::of(&tb)?);
    let eb_bias = match &bias {
        Some((t, ..)) => Some(Elems::of(t)?),
        None => None,
    };
    let mut eo = ElemsMut::of(&mut out)?;
    let floating = eo.is_floating();
    let f32_out = matches!(eo, ElemsMut::F32(_));
    let MatDims { batch, n, k, m } = d;
    for bi in 0..batch {
        for i in 0..n {
            for j in 0..m {
                let o = (bi * n + i) * m + j;
                let (ra, rb) = ((bi * n + i) * k, bi * k * m + j);
                if f32_out {
                    // ExecuTorch's vec_matmul/vec_addmm: an f32 sum in k order, then
                    // `sum * alpha + bias * beta`.
                    let mut acc = 0.0f32;
                    for p in 0..k {
                        acc += ea.f64(ra + p) as f32 * eb.f64(rb + p * m) as f32;
                    }
                    let v = match (&bias, &eb_bias) {
                        (Some((_, (s0, s1), beta, alpha)), Some(e)) => {
                            let (beta, alpha) = (beta.to_f64() as f32, alpha.to_f64() as f32);
                            let base = if beta == 0.0 { 0.0 } else { e.f64(i * s0 + j * s1) as f32 * beta };
                            acc * alpha + base
                        }
                        _ => acc,
                    };
                    eo.set_f64(o, v as f64);
                } else if floating {
                    let mut acc = 0.0f64;
                    for p in 0..k {
                        acc += ea.f64(ra + p) * eb.f64(rb + p * m);
                    }
                    let v = match (&bias, &eb_bias) {
                        (Some((_, (s0, s1), beta, alpha)), Some(e)) => {
                            let (beta, alpha) = (beta.to_f64(), alpha.to_f64());
                            // beta == 0 ignores self entirely (NaN/inf included), as PyTorch does.
                            let base = if beta == 0.0 { 0.0 } else { beta * e.f64(i * s0 + j * s1) };
                            base + alpha * acc
                        }
                        _ => acc,
                    };
                    eo.set_f64(o, v);
                } else {
                    let mut acc = 0i64;
                    for p in 0..k {
                        acc = acc.wrapping_add(ea.i64(ra + p).wrapping_mul(eb.i64(rb + p * m)));
                    }
                    let v = match (&bias, &eb_bias) {
                        (Some((_, (s0, s1), beta, alpha)), Some(e)) => {
                            let base = beta.to_i64().wrapping_mul(e.i64(i * s0 + j * s1));
                            base.wrapping_add(alpha.to_i64().wrapping_mul(acc))
                        }
                        _ => acc,
                    };
                    eo.set_i64(o, v);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn mm_hand_computed() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = h.f32(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::mm_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![58., 64., 139., 154.]);
    }

    #[test]
    fn mm_integer_and_half() {
        let mut h = OpHarness::new();
        let a = h.tensor::<i32>(ScalarType::Int, &[1, 2], &[3, -4]);
        let b = h.tensor::<i32>(ScalarType::Int, &[2, 2], &[5, 6, 7, 8]);
        let out = h.out(ScalarType::Int, &[1, 2]);
        h.call(super::mm_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<i32>(out), vec![-13, -14]);

        let a = h.tensor(ScalarType::Half, &[1, 2], &[f16::from_f32(0.5), f16::from_f32(2.0)]);
        let b = h.tensor(ScalarType::Half, &[2, 1], &[f16::from_f32(4.0), f16::from_f32(-1.5)]);
        let out = h.out(ScalarType::Half, &[1, 1]);
        h.call(super::mm_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<f16>(out), vec![f16::from_f32(-1.0)]);
    }

    #[test]
    fn mm_dtype_out_widens() {
        let mut h = OpHarness::new();
        let a = h.tensor(ScalarType::BFloat16, &[1, 2], &[bf16::from_f32(1.5), bf16::from_f32(2.0)]);
        let b = h.tensor(ScalarType::BFloat16, &[2, 1], &[bf16::from_f32(2.0), bf16::from_f32(0.25)]);
        let dt = h.scalar_type(ScalarType::Float);
        let out = h.out(ScalarType::Float, &[1, 1]);
        h.call(super::mm_dtype_out, &[a, b, dt, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![3.5]);
    }

    #[test]
    fn bmm_hand_computed() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 1, 2], &[1., 2., 3., 4.]);
        let b = h.f32(&[2, 2, 1], &[5., 6., 7., 8.]);
        let out = h.out(ScalarType::Float, &[2, 1, 1]);
        h.call(super::bmm_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![17., 53.]);
    }

    #[test]
    fn addmm_row_bias_beta_alpha() {
        let mut h = OpHarness::new();
        let bias = h.f32(&[1, 2], &[10., 20.]);
        let a = h.f32(&[2, 2], &[1., 2., 3., 4.]);
        let b = h.f32(&[2, 2], &[1., 0., 0., 1.]);
        let (beta, alpha) = (h.double(0.5), h.int(2));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::addmm_out, &[bias, a, b, beta, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![7., 14., 11., 18.]);
    }

    #[test]
    fn addmm_column_bias_and_zero_beta_ignores_nan() {
        let mut h = OpHarness::new();
        let bias = h.f32(&[2, 1], &[1., 2.]);
        let a = h.f32(&[2, 1], &[1., 2.]);
        let b = h.f32(&[1, 2], &[3., 4.]);
        let (beta, alpha) = (h.int(1), h.int(1));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::addmm_out, &[bias, a, b, beta, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![4., 5., 8., 10.]);

        let nan = h.f32(&[2], &[f32::NAN, f32::NAN]);
        let (beta, alpha) = (h.double(0.0), h.int(1));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::addmm_out, &[nan, a, b, beta, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![3., 4., 6., 8.]);
    }

    #[test]
    fn addmm_integer() {
        let mut h = OpHarness::new();
        let bias = h.i64(&[2], &[1, -1]);
        let a = h.i64(&[1, 1], &[3]);
        let b = h.i64(&[1, 2], &[2, 5]);
        let (beta, alpha) = (h.int(2), h.int(3));
        let out = h.out(ScalarType::Long, &[1, 2]);
        h.call(super::addmm_out, &[bias, a, b, beta, alpha, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![20, 43]);
    }

    #[test]
    fn errors_name_the_problem() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[0.; 6]);
        let b = h.f32(&[2, 3], &[0.; 6]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        let e = h.call(super::mm_out, &[a, b, out, out]).unwrap_err();
        assert!(e.message.contains("inner sizes"), "{e}");

        let b = h.tensor::<f64>(ScalarType::Double, &[3, 2], &[0.; 6]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        let e = h.call(super::mm_out, &[a, b, out, out]).unwrap_err();
        assert!(e.message.contains("dtypes differ"), "{e}");

        let bias = h.f32(&[3], &[0.; 3]);
        let b = h.f32(&[3, 2], &[0.; 6]);
        let (beta, alpha) = (h.int(1), h.int(1));
        let out = h.out(ScalarType::Float, &[2, 2]);
        let e = h.call(super::addmm_out, &[bias, a, b, beta, alpha, out, out]).unwrap_err();
        assert!(e.message.contains("broadcast"), "{e}");

        let a3 = h.f32(&[2, 1, 3], &[0.; 6]);
        let b3 = h.f32(&[3, 3, 1], &[0.; 9]);
        let out = h.out(ScalarType::Float, &[2, 1, 1]);
        let e = h.call(super::bmm_out, &[a3, b3, out, out]).unwrap_err();
        assert!(e.message.contains("batch"), "{e}");
    }
}
