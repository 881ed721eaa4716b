//! f32 `mm` / `bmm` / `addmm` on `matrixmultiply`'s sgemm; other dtypes and layouts go to the
//! portable reference.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use super::gemm::{par_sgemm, par_units, sgemm, Mat, PAR_MIN_WORK};
use crate::portable::linalg::{self as reference, bias_strides, mat_dims, result_sizes, MatDims};

/// Whether every argument in `ids` is a contiguous f32 tensor, judged from metadata only (so
/// outputs are not borrowed before the fallback decision).
pub(crate) fn all_f32_contiguous(args: &KernelArgs<'_>, ids: &[usize]) -> KernelResult<bool> {
    for &i in ids {
        let t = args.value(i)?.as_tensor().ok_or_else(|| kerr!("argument {i}: expected a Tensor"))?;
        if t.dtype != ScalarType::Float || !t.dim_order.is_contiguous() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `mm.out(self, mat2, *, out)`: args = [self, mat2, out, out].
pub fn mm_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if !all_f32_contiguous(args, &[0, 1, 2])? {
        return reference::mm_out(ctx, args);
    }
    batched_product(ctx.threads, args, false)
}

/// `bmm.out(self, mat2, *, out)`: args = [self, mat2, out, out].
pub fn bmm_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if !all_f32_contiguous(args, &[0, 1, 2])? {
        return reference::bmm_out(ctx, args);
    }
    batched_product(ctx.threads, args, true)
}

fn batched_product(threads: usize, args: &KernelArgs<'_>, batched: bool) -> KernelResult {
    let (ta, tb) = (args.tensor(0)?, args.tensor(1)?);
    let d = mat_dims(&ta, &tb, batched)?;
    let mut out = args.out(2)?;
    out.resize(&result_sizes(d, batched))?;
    gemm_batches(threads, d, ta.data()?, tb.data()?, out.data_mut()?)
}

/// `c[b] = a[b] @ b[b]` for dense row-major batches. Many batches (attention heads) split
/// over threads by batch; otherwise each product splits its rows.
pub(crate) fn gemm_batches(threads: usize, d: MatDims, a: &[f32], b: &[f32], c: &mut [f32]) -> KernelResult {
    let MatDims { batch, n, k, m } = d;
    let (sa, sb, sc) = (n * k, k * m, n * m);
    if c.is_empty() {
        return Ok(());
    }
    let one = |bi: usize, cb: &mut [f32]| {
        sgemm(1.0, Mat::row_major(&a[bi * sa..], n, k), Mat::row_major(&b[bi * sb..], k, m), 0.0, cb)
    };
    let work = batch.saturating_mul(sc).saturating_mul(k);
    if threads > 1 && batch >= threads && work >= PAR_MIN_WORK {
        return par_units(threads, c, sc, |first, chunk| {
            chunk.chunks_mut(sc).enumerate().try_for_each(|(i, cb)| one(first + i, cb))
        });
    }
    for (bi, cb) in c.chunks_mut(sc).enumerate() {
        par_sgemm(threads, 1.0, Mat::row_major(&a[bi * sa..], n, k), Mat::row_major(&b[bi * sb..], k, m), 0.0, cb)?;
    }
    Ok(())
}

/// `addmm.out(self, mat1, mat2, *, beta, alpha, out)`: args = [self, mat1, mat2, beta, alpha,
/// out, out]. `beta·self` (broadcast) initialises C, then sgemm adds `alpha·mat1@mat2`.
pub fn addmm_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if !all_f32_contiguous(args, &[0, 1, 2, 5])? {
        return reference::addmm_out(ctx, args);
    }
    let (bias, ta, tb) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let beta = args.scalar(3)?.to_f64() as f32;
    let alpha = args.scalar(4)?.to_f64() as f32;
    let d = mat_dims(&ta, &tb, false)?;
    let (s0, s1) = bias_strides(&bias, d.n, d.m)?;
    let mut out = args.out(5)?;
    out.resize(&[d.n, d.m])?;
    let c = out.data_mut::<f32>()?;
    let gemm_beta = if beta == 0.0 {
        0.0 // self is ignored entirely, NaN included
    } else {
        let bv = bias.data::<f32>()?;
        for (i, row) in c.chunks_mut(d.m.max(1)).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = beta * bv[i * s0 + j * s1];
            }
        }
        1.0
    };
    par_sgemm(
        ctx.threads,
        alpha,
        Mat::row_major(ta.data()?, d.n, d.k),
        Mat::row_major(tb.data()?, d.k, d.m),
        gemm_beta,
        c,
    )
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    use super::super::test_util::{assert_close, Lcg};
    use crate::portable::linalg as reference;

    /// Runs `fast` and `slow` on the same inputs (`make` builds the arg ids, with the out id
    /// at `out_pos`), returning both outputs.
    fn both(
        threads: usize,
        make: &dyn Fn(&mut OpHarness) -> (alloc::vec::Vec<u32>, u32),
        fast: KernelFn,
        slow: KernelFn,
    ) -> (alloc::vec::Vec<f32>, alloc::vec::Vec<f32>) {
        let mut h = OpHarness::new();
        h.ctx.threads = threads;
        let (ids, out) = make(&mut h);
        h.call(fast, &ids).unwrap();
        let got = h.read::<f32>(out);
        let mut h = OpHarness::new();
        let (ids, out) = make(&mut h);
        h.call(slow, &ids).unwrap();
        (got, h.read::<f32>(out))
    }

    #[test]
    fn mm_matches_reference() {
        for &(n, k, m) in &[(1, 1, 1), (4, 8, 3), (5, 16, 8), (17, 33, 9), (64, 70, 65), (3, 0, 2), (0, 4, 3)] {
            for threads in [1, 2] {
                let make = |h: &mut OpHarness| {
                    let mut r = Lcg::new((n * 100 + k * 10 + m) as u64);
                    let a = h.f32(&[n, k], &r.vec(n * k));
                    let b = h.f32(&[k, m], &r.vec(k * m));
                    let out = h.out(ScalarType::Float, &[n, m]);
                    (alloc::vec![a, b, out, out], out)
                };
                let (got, want) = both(threads, &make, super::mm_out, reference::mm_out);
                assert_close(&got, &want, 1e-4, &alloc::format!("mm {n}x{k}x{m} threads={threads}"));
            }
        }
    }

    #[test]
    fn bmm_matches_reference() {
        for &(b, n, k, m) in &[(2, 3, 4, 5), (4, 2, 8, 3), (8, 16, 24, 16), (1, 40, 50, 60), (3, 1, 1, 1)] {
            for threads in [1, 2, 3] {
                let make = |h: &mut OpHarness| {
                    let mut r = Lcg::new((b * 1000 + n * 100 + k * 10 + m) as u64);
                    let x = h.f32(&[b, n, k], &r.vec(b * n * k));
                    let y = h.f32(&[b, k, m], &r.vec(b * k * m));
                    let out = h.out(ScalarType::Float, &[b, n, m]);
                    (alloc::vec![x, y, out, out], out)
                };
                let (got, want) = both(threads, &make, super::bmm_out, reference::bmm_out);
                assert_close(&got, &want, 1e-4, &alloc::format!("bmm {b}x{n}x{k}x{m} threads={threads}"));
            }
        }
    }

    #[test]
    fn addmm_matches_reference_for_bias_shapes_and_scalars() {
        let (n, k, m) = (7, 19, 11);
        let bias_shapes: [&[usize]; 5] = [&[m], &[1, m], &[n, 1], &[n, m], &[1]];
        for bias_shape in bias_shapes {
            for &(beta, alpha) in &[(1.0, 1.0), (0.5, 2.0), (0.0, -1.5)] {
                for threads in [1, 2] {
                    let make = |h: &mut OpHarness| {
                        let mut r = Lcg::new(42);
                        let bn: usize = bias_shape.iter().product();
                        let bias = h.f32(bias_shape, &r.vec(bn));
                        let a = h.f32(&[n, k], &r.vec(n * k));
                        let b = h.f32(&[k, m], &r.vec(k * m));
                        let (be, al) = (h.double(beta), h.double(alpha));
                        let out = h.out(ScalarType::Float, &[n, m]);
                        (alloc::vec![bias, a, b, be, al, out, out], out)
                    };
                    let (got, want) = both(threads, &make, super::addmm_out, reference::addmm_out);
                    assert_close(&got, &want, 1e-4, &alloc::format!("addmm bias {bias_shape:?} beta {beta} alpha {alpha}"));
                }
            }
        }
    }

    #[test]
    fn addmm_zero_beta_ignores_nan_bias_and_threads_agree() {
        let (n, k, m) = (96, 80, 70);
        let run = |threads: usize| {
            let mut h = OpHarness::new();
            h.ctx.threads = threads;
            let mut r = Lcg::new(9);
            let bias = h.f32(&[m], &alloc::vec![f32::NAN; m]);
            let a = h.f32(&[n, k], &r.vec(n * k));
            let b = h.f32(&[k, m], &r.vec(k * m));
            let (be, al) = (h.int(0), h.int(1));
            let out = h.out(ScalarType::Float, &[n, m]);
            h.call(super::addmm_out, &[bias, a, b, be, al, out, out]).unwrap();
            h.read::<f32>(out)
        };
        let one = run(1);
        assert!(one.iter().all(|v| v.is_finite()));
        assert_eq!(one, run(2));
        assert_eq!(one, run(4));
    }

    #[test]
    fn non_f32_falls_back_to_reference() {
        let mut h = OpHarness::new();
        let a = h.tensor::<f64>(ScalarType::Double, &[1, 2], &[1.5, 2.0]);
        let b = h.tensor::<f64>(ScalarType::Double, &[2, 1], &[2.0, 4.0]);
        let out = h.out(ScalarType::Double, &[1, 1]);
        h.call(super::mm_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), alloc::vec![11.0]);

        let a = h.f32(&[2, 3], &[0.; 6]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        let e = h.call(super::mm_out, &[a, a, out, out]).unwrap_err();
        assert!(e.message.contains("inner sizes"), "{e}");
    }
}
