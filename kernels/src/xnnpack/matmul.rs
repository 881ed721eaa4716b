//! Matrix products whose right-hand operand is an activation (not packed at init): XNNPACK's
//! `BatchMatrixMultiply` (ExecuTorch's `bmm`, attention scores and values) and a
//! `FullyConnected` whose filter (and bias) are not constants (ExecuTorch's linear layers with
//! `force_non_static_weights_for_f32_linear`, or `mm` of two activations). Float values (f32,
//! or f16/bf16 held in f32), through the crate's bounds-checked `sgemm`.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::KernelResult;

use crate::optimized::gemm::{sgemm, Mat};

/// `y[b] = a[b] · B[b]` over broadcast batch dims: `a` `[..., m, k]`, `b` `[..., k, n]` (or
/// `[..., n, k]` with `transpose_b`, XNNPACK's `XNN_FLAG_TRANSPOSE_B`), `y` `[..., m, n]`.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchMatMul {
    m: usize,
    k: usize,
    n: usize,
    transpose_b: bool,
    /// The output's batch dims and each operand's, padded to the same rank (1 = broadcast).
    batch: Vec<usize>,
    batch_a: Vec<usize>,
    batch_b: Vec<usize>,
}

impl BatchMatMul {
    /// Shapes as XNNPACK checks them: ranks ≥ 2; batch dims broadcast NumPy-style (aligned at
    /// the right, 1 stretches) to the output's.
    pub fn new(a: &[usize], b: &[usize], y: &[usize], transpose_b: bool) -> Result<Self, String> {
        let (ra, rb, ry) = (a.len(), b.len(), y.len());
        let bad = || format!("batch matrix multiply of {a:?} by {b:?}{} into {y:?}: shapes do not match", if transpose_b { " (transposed)" } else { "" });
        if ra < 2 || rb < 2 || ry != ra.max(rb) {
            return Err(bad());
        }
        let (m, k) = (a[ra - 2], a[ra - 1]);
        let (kb, n) = if transpose_b { (b[rb - 1], b[rb - 2]) } else { (b[rb - 2], b[rb - 1]) };
        if k != kb || y[ry - 2] != m || y[ry - 1] != n {
            return Err(bad());
        }
        let batch_y = &y[..ry - 2];
        let pad = |d: &[usize]| -> Vec<usize> { core::iter::repeat_n(1, batch_y.len() - (d.len() - 2)).chain(d[..d.len() - 2].iter().copied()).collect() };
        let (ba, bb) = (pad(a), pad(b));
        for i in 0..batch_y.len() {
            let want = if ba[i] == 1 { bb[i] } else { ba[i] };
            if (ba[i] != 1 && bb[i] != 1 && ba[i] != bb[i]) || batch_y[i] != want {
                return Err(bad());
            }
        }
        Ok(BatchMatMul { m, k, n, transpose_b, batch: batch_y.to_vec(), batch_a: ba, batch_b: bb })
    }

    /// For each output batch in order, its batch index into `a` and into `b` (computed as the
    /// batches run: a broadcast over many batches costs no memory).
    fn pairs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let batches: usize = self.batch.iter().product();
        let mut idx = vec![0usize; self.batch.len()];
        (0..batches).map(move |_| {
            let (mut ia, mut ib) = (0, 0);
            for d in 0..idx.len() {
                ia = ia * self.batch_a[d] + if self.batch_a[d] == 1 { 0 } else { idx[d] };
                ib = ib * self.batch_b[d] + if self.batch_b[d] == 1 { 0 } else { idx[d] };
            }
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < self.batch[d] {
                    break;
                }
                idx[d] = 0;
            }
            (ia, ib)
        })
    }

    pub fn describe(&self) -> String {
        format!("{}x({}x{} by {}x{}{})", self.batch.iter().product::<usize>(), self.m, self.k, self.k, self.n, if self.transpose_b { "ᵀ" } else { "" })
    }

    pub fn run(&self, a: &[f32], b: &[f32], y: &mut [f32], min: f32, max: f32) -> KernelResult {
        let (m, k, n) = (self.m, self.k, self.n);
        if m == 0 || n == 0 {
            return Ok(());
        }
        for (i, (ia, ib)) in self.pairs().enumerate() {
            let (a0, b0, y0) = (ia * m * k, ib * k * n, i * m * n);
            let ai = a.get(a0..a0 + m * k).ok_or_else(|| rbuild_runtime::kerr!("batch matrix multiply: operand a too short"))?;
            let bi = b.get(b0..b0 + k * n).ok_or_else(|| rbuild_runtime::kerr!("batch matrix multiply: operand b too short"))?;
            let yi = y.get_mut(y0..y0 + m * n).ok_or_else(|| rbuild_runtime::kerr!("batch matrix multiply: output too short"))?;
            sgemm(1.0, Mat::row_major(ai, m, k), matrix_b(bi, k, n, self.transpose_b), 0.0, yi)?;
            clamp(yi, min, max);
        }
        Ok(())
    }
}

/// `B` as a `k × n` view: stored `[k, n]`, or `[n, k]` when transposed.
fn matrix_b(data: &[f32], k: usize, n: usize, transposed: bool) -> Mat<'_> {
    if transposed {
        Mat { data, rows: k, cols: n, row_stride: 1, col_stride: k }
    } else {
        Mat::row_major(data, k, n)
    }
}

fn clamp(y: &mut [f32], min: f32, max: f32) {
    if min != f32::NEG_INFINITY || max != f32::INFINITY {
        for v in y {
            *v = v.max(min).min(max);
        }
    }
}

/// `y[m, n] = x[m, k] · Wᵀ + bias` with `W` an activation: `[n, k]`, or `[k, n]` with
/// `transposed` (`XNN_FLAG_TRANSPOSE_WEIGHTS`); `bias` `[n]` or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FullyConnectedRuntime {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub transposed: bool,
}

impl FullyConnectedRuntime {
    pub fn run(&self, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32], min: f32, max: f32) -> KernelResult {
        let Self { m, k, n, transposed } = *self;
        let short = || rbuild_runtime::kerr!("fully connected: operands shorter than {m}x{k} by {k}x{n}");
        let (x, w, y) = (x.get(..m * k).ok_or_else(short)?, w.get(..k * n).ok_or_else(short)?, y.get_mut(..m * n).ok_or_else(short)?);
        // Stored [n, k] is Bᵀ: a k × n view with strides (1, k).
        sgemm(1.0, Mat::row_major(x, m, k), matrix_b(w, k, n, !transposed), 0.0, y)?;
        if let Some(b) = bias {
            let b = b.get(..n).ok_or_else(short)?;
            for row in y.chunks_exact_mut(n.max(1)) {
                for (v, &c) in row.iter_mut().zip(b) {
                    *v += c;
                }
            }
        }
        clamp(y, min, max);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, tb: bool) -> Vec<f32> {
        let mut y = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k).map(|t| a[i * k + t] * if tb { b[j * k + t] } else { b[t * n + j] }).sum();
            }
        }
        y
    }

    #[test]
    fn broadcast_batches_and_transposed_b() {
        let cases: &[(&[usize], &[usize], &[usize], bool)] = &[
            (&[3, 5, 8], &[3, 8, 6], &[3, 5, 6], false),
            (&[2, 3, 5, 8], &[1, 3, 8, 4], &[2, 3, 5, 4], false),
            (&[2, 1, 5, 8], &[3, 8, 4], &[2, 3, 5, 4], false),
            (&[2, 6, 8], &[2, 7, 8], &[2, 6, 7], true),
            (&[5, 8], &[4, 8, 3], &[4, 5, 3], false),
        ];
        for &(a, b, y, tb) in cases {
            let op = BatchMatMul::new(a, b, y, tb).unwrap();
            let (na, nb, ny): (usize, usize, usize) = (a.iter().product(), b.iter().product(), y.iter().product());
            let av: Vec<f32> = (0..na).map(|i| (i % 7) as f32 - 3.0).collect();
            let bv: Vec<f32> = (0..nb).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
            let mut got = vec![f32::NAN; ny];
            op.run(&av, &bv, &mut got, f32::NEG_INFINITY, f32::INFINITY).unwrap();
            let (m, k, n) = (op.m, op.k, op.n);
            for (i, (ia, ib)) in op.pairs().enumerate() {
                let want = naive(&av[ia * m * k..][..m * k], &bv[ib * k * n..][..k * n], m, k, n, tb);
                assert_eq!(&got[i * m * n..][..m * n], &want[..], "{a:?} {b:?}");
            }
        }
        // Batch index pairs follow broadcasting: [2,1] × [3] → (0,0) (0,1) (0,2) (1,0) …
        let op = BatchMatMul::new(&[2, 1, 1, 1], &[3, 1, 1], &[2, 3, 1, 1], false).unwrap();
        assert_eq!(op.pairs().collect::<Vec<_>>(), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
        assert!(BatchMatMul::new(&[3, 5, 8], &[3, 6, 8], &[3, 5, 6], false).is_err());
        assert!(BatchMatMul::new(&[2, 5, 8], &[3, 8, 6], &[3, 5, 6], false).is_err());
        assert!(BatchMatMul::new(&[8], &[8, 6], &[6], false).is_err());
        assert!(op.run(&[0.0; 1], &[0.0; 3], &mut [0.0; 5], 0.0, 1.0).is_err());
    }

    #[test]
    fn runtime_weights_fully_connected() {
        let (m, k, n) = (3, 4, 5);
        let x: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.25 - 1.0).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i % 3) as f32 - 1.0).collect();
        let bias: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut y = vec![0.0; m * n];
        FullyConnectedRuntime { m, k, n, transposed: false }.run(&x, &w, Some(&bias), &mut y, f32::NEG_INFINITY, f32::INFINITY).unwrap();
        let want: Vec<f32> = naive(&x, &w, m, k, n, true).iter().enumerate().map(|(i, v)| v + bias[i % n]).collect();
        assert_eq!(y, want);
        // Transposed weights: [k, n].
        let wt: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
        let mut y2 = vec![0.0; m * n];
        FullyConnectedRuntime { m, k, n, transposed: true }.run(&x, &wt, Some(&bias), &mut y2, f32::NEG_INFINITY, 2.0).unwrap();
        assert_eq!(y2, want.iter().map(|v| v.min(2.0)).collect::<Vec<_>>());
        assert!(FullyConnectedRuntime { m, k, n, transposed: false }.run(&x, &w[1..], None, &mut y, 0.0, 1.0).is_err());
    }
}
