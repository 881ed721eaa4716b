//! Elementwise binary operators with broadcasting and PyTorch's dtype rules.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, KernelEntry, Scalar};

use super::util::{broadcast_shapes, broadcast_strides, for_each_broadcast, Elems, ElemsMut};

pub const KERNELS: &[KernelEntry] = &[KernelEntry { op: "aten::add.out", kernel: add_out }];

/// `add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`:
/// args = [self, other, alpha, out, out].
fn add_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let alpha = args.scalar(2)?;
    binary_arith(args, 0, 1, 3, |a, b| a + alpha.to_f64() * b, |a, b| a.wrapping_add(alpha.to_i64().wrapping_mul(b)), alpha)
}

/// Broadcasts inputs `a` and `b` into `out`, computing in f64 for floating outputs and i64
/// for integer ones; all-f32 same-shape calls take a direct loop.
fn binary_arith(
    args: &KernelArgs<'_>,
    a: usize,
    b: usize,
    out: usize,
    ff: impl Fn(f64, f64) -> f64,
    fi: impl Fn(i64, i64) -> i64,
    _alpha: Scalar,
) -> KernelResult {
    let (ta, tb) = (args.tensor(a)?, args.tensor(b)?);
    let mut to = args.out(out)?;
    let sizes = broadcast_shapes(ta.sizes(), tb.sizes())?;
    to.resize(&sizes)?;
    let (ea, eb) = (Elems::of(&ta)?, Elems::of(&tb)?);
    let sa = broadcast_strides(ta.sizes(), &sizes)?;
    let sb = broadcast_strides(tb.sizes(), &sizes)?;
    let mut eo = ElemsMut::of(&mut to)?;
    if eo.is_floating() {
        for_each_broadcast(&sizes, [&sa, &sb], |o, [i, j]| eo.set_f64(o, ff(ea.f64(i), eb.f64(j))));
    } else if matches!(eo, ElemsMut::Bool(_)) {
        return Err(kerr!("bool output is not supported for this arithmetic op"));
    } else {
        for_each_broadcast(&sizes, [&sa, &sb], |o, [i, j]| eo.set_i64(o, fi(ea.i64(i), eb.i64(j))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn add_broadcasts_with_alpha() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = h.f32(&[3], &[10., 20., 30.]);
        let alpha = h.int(2);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(super::add_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![21., 42., 63., 24., 45., 66.]);
    }

    #[test]
    fn add_rejects_bad_broadcast() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 3], &[0.; 6]);
        let b = h.f32(&[2], &[0.; 2]);
        let alpha = h.int(1);
        let out = h.out(ScalarType::Float, &[2, 3]);
        let e = h.call(super::add_out, &[a, b, alpha, out, out]).unwrap_err();
        assert!(e.message.contains("broadcast"), "{e}");
    }
}
