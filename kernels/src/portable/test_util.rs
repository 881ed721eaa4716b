//! Helpers the portable kernels' unit tests share.

use alloc::vec::Vec;

use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::tensor::DimOrder;
use rbuild_runtime::Value;

/// 0, 1, 2, … as f32.
pub fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// Gives tensor value `id` the dim order `order` (its bytes stay as they are).
pub fn set_dim_order(h: &mut OpHarness, id: u32, order: &[u8]) {
    if let Value::Tensor(t) = &mut h.frame.values[id as usize] {
        t.dim_order = DimOrder::new(order).unwrap();
    }
}

/// Element-wise `got ≈ want`: equal, both NaN, or within `tol` relative to 1 + |want|.
pub fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let ok = (g.is_nan() && w.is_nan()) || *g as f64 == *w || (*g as f64 - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "got {got:?}, want {want:?}");
    }
}

/// A `(Tensor self, *, Tensor(a!) out)` kernel on a 1-D f32 tensor; its f32 out.
pub fn run_f32(k: rbuild_runtime::kernel::KernelFn, x: &[f32]) -> Vec<f32> {
    let mut h = OpHarness::new();
    let a = h.f32(&[x.len()], x);
    let o = h.out(rbuild_runtime::ScalarType::Float, &[x.len()]);
    h.call(k, &[a, o, o]).unwrap();
    h.read::<f32>(o)
}
