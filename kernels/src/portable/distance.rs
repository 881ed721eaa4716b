//! Pairwise p-norm distances: between the rows of two (batched) matrices (`_cdist_forward`) and
//! among the rows of one matrix (`_pdist_forward`).
//!
//! Distances accumulate in f64 over |a − b|. For p = 2, PyTorch's `_cdist_forward` may take a
//! matrix-product route (‖a‖² + ‖b‖² − 2a·b, when compute_mode asks for it or either side has
//! more than 25 rows); that route only adds rounding error, so every mode computes the direct
//! sum here (exact to the tolerance, and exactly 0 for equal rows).

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorRef};
use rbuild_runtime::kerr;

use super::reduce::check_layouts;
use super::util::{broadcast_shapes, broadcast_strides, for_each_broadcast, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::_cdist_forward.out" => cdist_forward_out,
    "aten::_pdist_forward.out" => pdist_forward_out,
}

/// Which p-norm, with the special cases PyTorch treats apart.
#[derive(Clone, Copy)]
enum Norm {
    /// Number of differing coordinates.
    Zero,
    One,
    Two,
    Inf,
    P(f64),
}

impl Norm {
    fn new(p: f64, what: &str) -> KernelResult<Norm> {
        if p.is_nan() || p < 0.0 {
            return Err(kerr!("{what}: p must be non-negative, got {p}"));
        }
        Ok(if p == 0.0 {
            Norm::Zero
        } else if p == 1.0 {
            Norm::One
        } else if p == 2.0 {
            Norm::Two
        } else if p == f64::INFINITY {
            Norm::Inf
        } else {
            Norm::P(p)
        })
    }

    /// The distance between the rows of `m` elements at `a` and `b`.
    fn distance(self, x: &Elems<'_>, a: usize, y: &Elems<'_>, b: usize, m: usize) -> f64 {
        let diffs = (0..m).map(|k| libm::fabs(x.f64(a + k) - y.f64(b + k)));
        match self {
            Norm::Zero => diffs.filter(|&d| d != 0.0).count() as f64,
            Norm::One => diffs.sum(),
            Norm::Two => libm::sqrt(diffs.map(|d| d * d).sum()),
            // NaN propagates, as PyTorch's max does.
            Norm::Inf => diffs.fold(0.0, |acc: f64, d| if acc.is_nan() || d.is_nan() { f64::NAN } else { acc.max(d) }),
            Norm::P(p) => libm::pow(diffs.map(|d| libm::pow(d, p)).sum(), 1.0 / p),
        }
    }
}

fn require_floating(t: &TensorRef<'_>, what: &str, name: &str) -> KernelResult {
    if t.dtype.is_floating() {
        Ok(())
    } else {
        Err(kerr!("{what}: {name} must be a floating tensor, got {}", t.dtype))
    }
}

/// `_cdist_forward.out(Tensor x1, Tensor x2, float p, int? compute_mode, *, Tensor(a!) out)`:
/// args = [x1, x2, p, compute_mode, out, out].
///
/// x1 [*B1, P, M] and x2 [*B2, R, M] give [broadcast(B1, B2), P, R]: the p-norm distance of
/// every row of x1 to every row of x2 (0 when M = 0).
pub fn cdist_forward_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "_cdist_forward";
    let x1 = args.tensor(0)?;
    let x2 = args.tensor(1)?;
    let norm = Norm::new(args.double(2)?, WHAT)?;
    if let Some(mode) = args.opt_int(3)?.filter(|m| !(0..=2).contains(m)) {
        return Err(kerr!("{WHAT}: compute_mode must be 0, 1 or 2, got {mode}"));
    }
    let mut out = args.out(4)?;
    check_layouts(&x1, &out, WHAT)?;
    check_layouts(&x2, &out, WHAT)?;
    require_floating(&x1, WHAT, "x1")?;
    if x2.dtype != x1.dtype || out.dtype != x1.dtype {
        return Err(kerr!("{WHAT}: x1 ({}), x2 ({}) and out ({}) must share one dtype", x1.dtype, x2.dtype, out.dtype));
    }
    if x1.dim() < 2 || x2.dim() < 2 {
        return Err(kerr!("{WHAT}: x1 {:?} and x2 {:?} must have at least 2 dims", x1.sizes(), x2.sizes()));
    }
    let (s1, s2) = (x1.sizes(), x2.sizes());
    let (p_rows, m) = (s1[s1.len() - 2], s1[s1.len() - 1]);
    let r_rows = s2[s2.len() - 2];
    if s2[s2.len() - 1] != m {
        return Err(kerr!("{WHAT}: x1 {s1:?} and x2 {s2:?} must have the same number of columns"));
    }
    let (b1, b2) = (&s1[..s1.len() - 2], &s2[..s2.len() - 2]);
    let batch = broadcast_shapes(b1, b2).map_err(|e| kerr!("{WHAT}: batch dims: {}", e.message))?;
    let mut out_sizes = batch.clone();
    out_sizes.extend([p_rows, r_rows]);
    out.resize(&out_sizes)?;
    // Strides in whole matrices of each input along the broadcast batch dims.
    let st1 = broadcast_strides(b1, &batch)?;
    let st2 = broadcast_strides(b2, &batch)?;
    let (x, y) = (Elems::of(&x1)?, Elems::of(&x2)?);
    let mut eo = ElemsMut::of(&mut out)?;
    let (mat1, mat2, mat_out) = (p_rows * m, r_rows * m, p_rows * r_rows);
    for_each_broadcast(&batch, [&st1, &st2], |b, [i1, i2]| {
        for i in 0..p_rows {
            for j in 0..r_rows {
                let d = norm.distance(&x, i1 * mat1 + i * m, &y, i2 * mat2 + j * m, m);
                eo.set_f64(b * mat_out + i * r_rows + j, d);
            }
        }
    });
    Ok(())
}

/// `_pdist_forward.out(Tensor self, float p=2, *, Tensor(a!) out)`: args = [self, p, out,
/// out]. For [N, M] the N(N−1)/2 distances between rows i < j, in row-major (i, j) order.
pub fn pdist_forward_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "_pdist_forward";
    let inp = args.tensor(0)?;
    let norm = Norm::new(args.double(1)?, WHAT)?;
    let mut out = args.out(2)?;
    check_layouts(&inp, &out, WHAT)?;
    require_floating(&inp, WHAT, "input")?;
    if out.dtype != inp.dtype {
        return Err(kerr!("{WHAT}: output dtype {} differs from the input dtype {}", out.dtype, inp.dtype));
    }
    if inp.dim() != 2 {
        return Err(kerr!("{WHAT}: input must be a 2-D matrix, got shape {:?}", inp.sizes()));
    }
    let (n, m) = (inp.sizes()[0], inp.sizes()[1]);
    // With zero columns the row count is not bounded by the data size: check the product.
    let pairs = n.checked_mul(n.saturating_sub(1)).map(|v| v / 2).ok_or_else(|| kerr!("{WHAT}: {n} rows give too many pairs"))?;
    out.resize(&[pairs])?;
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            eo.set_f64(k, norm.distance(&x, i * m, &x, j * m, m));
            k += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use rbuild_runtime::ScalarType;
    use half::f16;
    use rbuild_runtime::harness::OpHarness;

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol || (x.is_nan() && y.is_nan()), "{a:?} vs {b:?}");
        }
    }

    fn cdist(h: &mut OpHarness, x1: u32, x2: u32, p: f64, sizes: &[usize]) -> Result<Vec<f32>, rbuild_runtime::kernel::KernelError> {
        let (pv, mode) = (h.double(p), h.none());
        let out = h.out(ScalarType::Float, sizes);
        h.call(cdist_forward_out, &[x1, x2, pv, mode, out, out]).map(|_| h.read::<f32>(out))
    }

    #[test]
    fn cdist_norms() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 2], &[0., 0., 1., 1.]);
        let b = h.f32(&[1, 2], &[3., 4.]);
        close(&cdist(&mut h, a, b, 2., &[2, 1]).unwrap(), &[5., 13f32.sqrt()], 1e-6);
        close(&cdist(&mut h, a, b, 1., &[2, 1]).unwrap(), &[7., 5.], 1e-6);
        close(&cdist(&mut h, a, b, 0., &[2, 1]).unwrap(), &[2., 2.], 0.);
        close(&cdist(&mut h, a, b, f64::INFINITY, &[2, 1]).unwrap(), &[4., 3.], 0.);
        close(&cdist(&mut h, a, b, 3., &[2, 1]).unwrap(), &[(27f32 + 64.).cbrt(), (8f32 + 27.).cbrt()], 1e-5);
        close(&cdist(&mut h, a, b, 0.5, &[2, 1]).unwrap(), &[(3f32.sqrt() + 2.).powi(2), (2f32.sqrt() + 3f32.sqrt()).powi(2)], 1e-5);
        // equal rows are exactly 0 apart
        close(&cdist(&mut h, a, a, 2., &[2, 2]).unwrap(), &[0., 2f32.sqrt(), 2f32.sqrt(), 0.], 1e-6);
    }

    #[test]
    fn cdist_batch_broadcast_and_empty() {
        let mut h = OpHarness::new();
        // x1 [2, 1, 1] (two batches), x2 [1, 2, 1] (one batch, broadcast)
        let a = h.f32(&[2, 1, 1], &[0., 10.]);
        let b = h.f32(&[1, 2, 1], &[1., 4.]);
        close(&cdist(&mut h, a, b, 1., &[2, 1, 2]).unwrap(), &[1., 4., 9., 6.], 0.);
        // x2 without batch dims
        let c = h.f32(&[2, 1], &[1., 4.]);
        close(&cdist(&mut h, a, c, 1., &[2, 1, 2]).unwrap(), &[1., 4., 9., 6.], 0.);
        // zero columns: all distances 0
        let e1 = h.f32(&[2, 0], &[]);
        let e2 = h.f32(&[3, 0], &[]);
        close(&cdist(&mut h, e1, e2, 2., &[2, 3]).unwrap(), &[0.; 6], 0.);
        // double
        let d1 = h.tensor::<f64>(ScalarType::Double, &[1, 2], &[1., 2.]);
        let d2 = h.tensor::<f64>(ScalarType::Double, &[1, 2], &[4., 6.]);
        let (pv, mode) = (h.double(2.), h.int(2));
        let out = h.out(ScalarType::Double, &[1, 1]);
        h.call(cdist_forward_out, &[d1, d2, pv, mode, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), vec![5.]);
    }

    #[test]
    fn cdist_errors() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[0.; 6]);
        let b = h.f32(&[2, 2], &[0.; 4]);
        assert!(cdist(&mut h, a, b, 2., &[2, 2]).is_err()); // column mismatch
        assert!(cdist(&mut h, a, a, -1., &[2, 2]).is_err());
        assert!(cdist(&mut h, a, a, f64::NAN, &[2, 2]).is_err());
        let v = h.f32(&[3], &[0.; 3]);
        assert!(cdist(&mut h, v, a, 2., &[3, 2]).is_err()); // rank 1
        let bb1 = h.f32(&[2, 1, 3], &[0.; 6]);
        let bb2 = h.f32(&[3, 1, 3], &[0.; 9]);
        assert!(cdist(&mut h, bb1, bb2, 2., &[2, 1, 1]).is_err()); // batch not broadcastable
        assert!(cdist(&mut h, a, a, 2., &[3, 3]).is_err()); // wrong out shape
        let i = h.i64(&[2, 3], &[0; 6]);
        assert!(cdist(&mut h, i, i, 2., &[2, 2]).is_err());
        let (pv, bad_mode) = (h.double(2.), h.int(3));
        let out = h.out(ScalarType::Float, &[2, 2]);
        assert!(h.call(cdist_forward_out, &[a, a, pv, bad_mode, out, out]).is_err());
    }

    #[test]
    fn pdist_pairs_and_dtypes() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3, 2], &[0., 0., 3., 4., 6., 8.]);
        let (p2, p1) = (h.double(2.), h.double(1.));
        let out = h.out(ScalarType::Float, &[3]);
        h.call(pdist_forward_out, &[x, p2, out, out]).unwrap();
        close(&h.read::<f32>(out), &[5., 10., 5.], 1e-6);
        h.call(pdist_forward_out, &[x, p1, out, out]).unwrap();
        close(&h.read::<f32>(out), &[7., 14., 7.], 0.);
        let xh = h.tensor::<f16>(ScalarType::Half, &[2, 2], &[0., 0., 3., 4.].map(f16::from_f32));
        let pinf = h.double(f64::INFINITY);
        let outh = h.out(ScalarType::Half, &[1]);
        h.call(pdist_forward_out, &[xh, pinf, outh, outh]).unwrap();
        assert_eq!(h.read::<f16>(outh)[0].to_f32(), 4.);
        // one row (or none): no pairs
        let one = h.f32(&[1, 3], &[1., 2., 3.]);
        let out0 = h.out(ScalarType::Float, &[0]);
        h.call(pdist_forward_out, &[one, p2, out0, out0]).unwrap();
        let none = h.f32(&[0, 3], &[]);
        h.call(pdist_forward_out, &[none, p2, out0, out0]).unwrap();
        // errors
        let pneg = h.double(-2.);
        assert!(h.call(pdist_forward_out, &[x, pneg, out, out]).is_err());
        let v = h.f32(&[3], &[0.; 3]);
        assert!(h.call(pdist_forward_out, &[v, p2, out, out]).is_err());
        let outd = h.out(ScalarType::Double, &[3]);
        assert!(h.call(pdist_forward_out, &[x, p2, outd, outd]).is_err());
        let out2 = h.out(ScalarType::Float, &[2]);
        assert!(h.call(pdist_forward_out, &[x, p2, out2, out2]).is_err());
    }
}
