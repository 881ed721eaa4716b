//! A bounds-checked wrapper over `matrixmultiply::sgemm`, and splitting work over threads.
//!
//! `sgemm` is the one `unsafe` call of the optimized kernels: it takes raw pointers and strides.
//! [`sgemm`] here checks every index it can reach against the slices first.

use rbuild_runtime::kerr;
use rbuild_runtime::kernel::KernelResult;

/// A read-only f32 matrix view with arbitrary (non-negative) strides, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> Mat<'a> {
    /// A dense row-major `rows × cols` matrix at the start of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat { data, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// Rows `first .. first + count`.
    pub fn row_block(self, first: usize, count: usize) -> Mat<'a> {
        let start = (first * self.row_stride).min(self.data.len());
        Mat { data: &self.data[start..], rows: count, ..self }
    }

    /// Whether every element `(i, j)` lies inside `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|r| (self.cols - 1).checked_mul(self.col_stride).and_then(|c| r.checked_add(c)));
        matches!(last, Some(l) if l < self.data.len())
    }

    /// Strides as sgemm wants them; a stride along a length-1 dim is never used, so it is 0.
    fn strides(&self) -> (isize, isize) {
        let s = |len: usize, st: usize| if len > 1 { st as isize } else { 0 };
        (s(self.rows, self.row_stride), s(self.cols, self.col_stride))
    }
}

/// `C ← alpha·A·B + beta·C` with `C` dense row-major `[A.rows, B.cols]` (exactly `c.len()`
/// elements). `beta == 0` overwrites `C` without reading it (NaN included).
pub(crate) fn sgemm(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: &mut [f32]) -> KernelResult {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(kerr!("gemm: inner sizes differ ({m}x{k} by {}x{n})", b.rows));
    }
    if c.len() != m * n {
        return Err(kerr!("gemm: output holds {} elements, expected {m}x{n}", c.len()));
    }
    if !a.in_bounds() || !b.in_bounds() {
        return Err(kerr!("gemm: operand view exceeds its data ({m}x{k} by {k}x{n})"));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // Empty sum: C = beta·C.
        for v in c.iter_mut() {
            *v = if beta == 0.0 { 0.0 } else { beta * *v };
        }
        return Ok(());
    }
    let ((rsa, csa), (rsb, csb)) = (a.strides(), b.strides());
    // SAFETY: every element sgemm reads, A[i*rsa + j*csa] for i < m, j < k (likewise B), lies
    // inside its slice (`in_bounds`); C is an exclusively borrowed dense m×n row-major block
    // (row stride n, column stride 1), so its elements are distinct and inside `c`. The
    // shared borrows of A/B cannot alias the `&mut` C.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.data.as_ptr(),
            rsa,
            csa,
            b.data.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    Ok(())
}

/// Below this many multiply-adds a thread costs more than it saves.
pub(crate) const PAR_MIN_WORK: usize = 1 << 18;

/// [`sgemm`] with C's rows split over up to `threads` workers when the product is large.
pub(crate) fn par_sgemm(threads: usize, alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: &mut [f32]) -> KernelResult {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if threads <= 1 || m < 2 || n == 0 || m.saturating_mul(k).saturating_mul(n) < PAR_MIN_WORK || c.len() != m * n {
        return sgemm(alpha, a, b, beta, c);
    }
    par_units(threads, c, n, |first, rows| sgemm(alpha, a.row_block(first, rows.len() / n), b, beta, rows))
}

/// Runs `f(first_unit, chunk)` over `data` cut into consecutive runs of whole `unit`-sized
/// pieces, one run per worker (up to `threads`, std only). Without std, or with one thread,
/// `f` sees all of `data` at once.
pub(crate) fn par_units<F>(threads: usize, data: &mut [f32], unit: usize, f: F) -> KernelResult
where
    F: Fn(usize, &mut [f32]) -> KernelResult + Sync,
{
    let units = data.len().checked_div(unit).unwrap_or(0);
    let workers = threads.min(units);
    if workers <= 1 {
        return f(0, data);
    }
    par_split(data, unit, units.div_ceil(workers), &f)
}

#[cfg(feature = "std")]
fn par_split<F>(data: &mut [f32], unit: usize, per: usize, f: &F) -> KernelResult
where
    F: Fn(usize, &mut [f32]) -> KernelResult + Sync,
{
    std::thread::scope(|s| {
        let mut chunks = data.chunks_mut(per * unit).enumerate();
        // The caller's thread takes the first chunk itself.
        let first = chunks.next();
        let handles: alloc::vec::Vec<_> = chunks.map(|(i, chunk)| s.spawn(move || f(i * per, chunk))).collect();
        let mut result = match first {
            Some((_, chunk)) => f(0, chunk),
            None => Ok(()),
        };
        for h in handles {
            let r = h.join().unwrap_or_else(|_| Err(kerr!("a kernel worker thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result
    })
}

#[cfg(not(feature = "std"))]
fn par_split<F>(data: &mut [f32], _unit: usize, _per: usize, f: &F) -> KernelResult
where
    F: Fn(usize, &mut [f32]) -> KernelResult + Sync,
{
    f(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgemm_matches_naive_with_strided_views() {
        // A = 2x3 row-major; B = 3x2 read transposed out of a 2x3 buffer.
        let a = [1., 2., 3., 4., 5., 6.];
        let bt = [7., 9., 11., 8., 10., 12.];
        let b = Mat { data: &bt, rows: 3, cols: 2, row_stride: 1, col_stride: 3 };
        let mut c = [1.0f32; 4];
        sgemm(1.0, Mat::row_major(&a, 2, 3), b, 2.0, &mut c).unwrap();
        assert_eq!(c, [60., 66., 141., 156.]);
    }

    #[test]
    fn sgemm_rejects_out_of_bounds_views() {
        let a = [0.0f32; 5];
        let mut c = [0.0f32; 4];
        let e = sgemm(1.0, Mat::row_major(&a, 2, 3), Mat::row_major(&[0.0; 6], 3, 2), 0.0, &mut c).unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
    }

    #[test]
    fn sgemm_empty_inner_scales_c() {
        let mut c = [f32::NAN, 2.0];
        sgemm(1.0, Mat::row_major(&[], 1, 0), Mat::row_major(&[], 0, 2), 0.0, &mut c).unwrap();
        assert_eq!(c, [0.0, 0.0]);
    }
}
