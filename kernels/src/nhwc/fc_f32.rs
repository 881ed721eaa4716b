//! f32 fully connected: `y[m, n] = clamp(x[m, k] · Wᵀ + b, min, max)`, a thin layer over the
//! packed-weight GEMM ([`super::gemm_f32`]); with `m = 1` it is a GEMV that streams the packed
//! weights once (bandwidth-bound), split over output-channel panels when threads are available.

use super::gemm_f32::{gemm_f32, PackedWeightsF32};
use super::Parallel;
use alloc::format;
use alloc::string::String;

/// A fully-connected layer with its weights packed for the GEMM micro-kernels.
#[derive(Clone)]
pub struct FullyConnectedF32 {
    w: PackedWeightsF32,
}

impl FullyConnectedF32 {
    /// `filter` is `[n, k]` (output channel major), `bias` `[n]`.
    pub fn new(n: usize, k: usize, filter: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        if filter.len() != n * k {
            return Err(format!("fully connected: filter has {} elements, [{n}, {k}] needs {}", filter.len(), n * k));
        }
        Ok(FullyConnectedF32 { w: PackedWeightsF32::new(n, k, filter, bias)? })
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.w.n()
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.w.k()
    }

    /// `x` is `[m, k]`, `y` `[m, n]` (exact lengths).
    pub fn run(&self, par: &dyn Parallel, m: usize, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let (n, k) = (self.w.n(), self.w.k());
        if x.len() != m * k || y.len() != m * n {
            return Err(format!(
                "fully connected: x has {} elements and y {}, [{m}, {k}] → [{m}, {n}] needs {} and {}",
                x.len(),
                y.len(),
                m * k,
                m * n
            ));
        }
        gemm_f32(par, m, x, k, &self.w, y, n, min, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::reference::fully_connected_f32;
    use crate::nhwc::Serial;
    use crate::optimized::test_util::{assert_close, Lcg};
    use alloc::vec;

    #[test]
    fn fc_matches_reference() {
        for (i, &(m, n, k)) in [(1, 1000, 1280), (1, 7, 3), (3, 17, 33), (8, 40, 5), (2, 1, 1)].iter().enumerate() {
            let mut g = Lcg::new(i as u64 + 50);
            let x = g.vec(m * k);
            let w = g.vec(n * k);
            let b = g.vec(n);
            let (min, max) = if i % 2 == 0 { (f32::NEG_INFINITY, f32::INFINITY) } else { (0.0, 6.0) };
            let fc = FullyConnectedF32::new(n, k, &w, Some(&b)).unwrap();
            let mut y = vec![0.0; m * n];
            fc.run(&Serial, m, &x, &mut y, min, max).unwrap();
            let want = fully_connected_f32(m, n, k, &x, &w, Some(&b), min, max);
            assert_close(&y, &want, 1e-5 * (k as f32).sqrt(), "fc");
        }
    }

    #[test]
    fn fc_bad_sizes_are_errors() {
        assert!(FullyConnectedF32::new(3, 4, &[0.0; 11], None).is_err());
        assert!(FullyConnectedF32::new(3, 4, &[0.0; 12], Some(&[0.0; 2])).is_err());
        let fc = FullyConnectedF32::new(3, 4, &[0.0; 12], None).unwrap();
        assert!(fc.run(&Serial, 2, &[0.0; 7], &mut [0.0; 6], 0.0, 1.0).is_err());
        assert!(fc.run(&Serial, 2, &[0.0; 8], &mut [0.0; 5], 0.0, 1.0).is_err());
        assert!(fc.run(&Serial, 2, &[0.0; 8], &mut [0.0; 6], 0.0, 1.0).is_ok());
    }
}
