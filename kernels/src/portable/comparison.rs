//! Elementwise comparisons (`eq`, `ne`, `lt`, `le`, `gt`, `ge`; Tensor and Scalar forms) with
//! broadcasting and PyTorch's scalar rounding. All-f32 and all-i64 operands into a Bool out run
//! typed row loops; everything else compares in f64 or i64.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::ScalarType;

use super::binary::{broadcast_plan, broadcast_rows, f32_scalar, i64_scalar, view, Operand};
use super::util::{for_each_broadcast, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::eq.Tensor_out" => eq_tensor_out,
    "aten::eq.Scalar_out" => eq_scalar_out,
    "aten::ne.Tensor_out" => ne_tensor_out,
    "aten::ne.Scalar_out" => ne_scalar_out,
    "aten::lt.Tensor_out" => lt_tensor_out,
    "aten::lt.Scalar_out" => lt_scalar_out,
    "aten::le.Tensor_out" => le_tensor_out,
    "aten::le.Scalar_out" => le_scalar_out,
    "aten::gt.Tensor_out" => gt_tensor_out,
    "aten::gt.Scalar_out" => gt_scalar_out,
    "aten::ge.Tensor_out" => ge_tensor_out,
    "aten::ge.Scalar_out" => ge_scalar_out,
}

/// A comparison `a OP b` written as 0/1 into the out (normally Bool). Floating operands compare
/// in f64 (exact for every dtype, scalars pre-rounded), integers in i64.
fn compare(
    args: &KernelArgs<'_>,
    b: Operand<'_>,
    ff: impl Fn(f64, f64) -> bool,
    fi: impl Fn(i64, i64) -> bool,
    f32f: impl Fn(f32, f32) -> bool,
) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    let mut to = args.out(2)?;
    let (sizes, st) = broadcast_plan(&[a, b], &to)?;
    to.resize(&sizes)?;
    if to.dtype == ScalarType::Bool {
        let (mut ca, mut cb) = ([0f32], [0f32]);
        if let (Some(xa), Some(xb)) = (view(a, &mut ca, f32_scalar), view(b, &mut cb, f32_scalar)) {
            broadcast_rows(&sizes, &st[0], &st[1], xa, xb, to.data_mut::<u8>()?, |x, y| f32f(x, y) as u8);
            return Ok(());
        }
        let (mut ca, mut cb) = ([0i64], [0i64]);
        if let (Some(xa), Some(xb)) = (view(a, &mut ca, i64_scalar), view(b, &mut cb, i64_scalar)) {
            broadcast_rows(&sizes, &st[0], &st[1], xa, xb, to.data_mut::<u8>()?, |x, y| fi(x, y) as u8);
            return Ok(());
        }
    }
    let float = a.is_floating() || b.is_floating();
    let (ea, eb) = (a.src(b.dtype())?, b.src(a.dtype())?);
    let mut eo = ElemsMut::of(&mut to)?;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| {
        let r = if float { ff(ea.f64(i), eb.f64(j)) } else { fi(ea.i64(i), eb.i64(j)) };
        eo.set_bool(o, r)
    });
    Ok(())
}

/// `<op>.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)` and
/// `<op>.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)` for each comparison.
macro_rules! comparison_kernels {
    ($($tensor_fn:ident, $scalar_fn:ident, $op:tt;)*) => {$(
        pub fn $tensor_fn(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            compare(args, Operand::tensor(args, 1)?, |x, y| x $op y, |x, y| x $op y, |x, y| x $op y)
        }
        pub fn $scalar_fn(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            compare(args, Operand::scalar(args, 1)?, |x, y| x $op y, |x, y| x $op y, |x, y| x $op y)
        }
    )*};
}
comparison_kernels! {
    eq_tensor_out, eq_scalar_out, ==;
    ne_tensor_out, ne_scalar_out, !=;
    lt_tensor_out, lt_scalar_out, <;
    le_tensor_out, le_scalar_out, <=;
    gt_tensor_out, gt_scalar_out, >;
    ge_tensor_out, ge_scalar_out, >=;
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    #[test]
    fn comparisons_tensor_and_scalar() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 2., 3., 0., 2., 5.]);
        let y = h.f32(&[3], &[1., 2., 4.]);
        let o = h.out(ScalarType::Bool, &[2, 3]);
        let cases: [(KernelFn, [bool; 6]); 6] = [
            (super::eq_tensor_out, [true, true, false, false, true, false]),
            (super::ne_tensor_out, [false, false, true, true, false, true]),
            (super::lt_tensor_out, [false, false, true, true, false, false]),
            (super::le_tensor_out, [true, true, true, true, true, false]),
            (super::gt_tensor_out, [false, false, false, false, false, true]),
            (super::ge_tensor_out, [true, true, false, false, true, true]),
        ];
        for (k, want) in cases {
            h.call(k, &[x, y, o, o]).unwrap();
            assert_eq!(h.read_bool(o), want.to_vec());
        }
        let two = h.int(2);
        let cases: [(KernelFn, [bool; 6]); 6] = [
            (super::eq_scalar_out, [false, true, false, false, true, false]),
            (super::ne_scalar_out, [true, false, true, true, false, true]),
            (super::lt_scalar_out, [true, false, false, true, false, false]),
            (super::le_scalar_out, [true, true, false, true, true, false]),
            (super::gt_scalar_out, [false, false, true, false, false, true]),
            (super::ge_scalar_out, [false, true, true, false, true, true]),
        ];
        for (k, want) in cases {
            h.call(k, &[x, two, o, o]).unwrap();
            assert_eq!(h.read_bool(o), want.to_vec());
        }
    }

    #[test]
    fn comparisons_round_scalar_and_use_i64() {
        let mut h = OpHarness::new();
        // 0.1 compares as f32(0.1) against an f32 tensor (PyTorch), not as the f64 0.1.
        let x = h.f32(&[2], &[0.1, 0.2]);
        let s = h.double(0.1);
        let o = h.out(ScalarType::Bool, &[2]);
        h.call(super::eq_scalar_out, &[x, s, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, false]);

        // Large int64 values that f64 cannot tell apart.
        let big = 1i64 << 60;
        let a = h.i64(&[2], &[big, big + 1]);
        let b = h.i64(&[1], &[big]);
        h.call(super::eq_tensor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, false]);

        // Int tensor vs Int32 tensor through the generic path, with a Long out of 0/1.
        let c = h.tensor(ScalarType::Int, &[2], &[5i32, 7]);
        let d = h.i64(&[2], &[7, 7]);
        let ol = h.out(ScalarType::Long, &[2]);
        h.call(super::le_tensor_out, &[c, d, ol, ol]).unwrap();
        assert_eq!(h.read::<i64>(ol), vec![1, 1]);
        // f64 tensor vs 2.5 scalar.
        let e = h.tensor(ScalarType::Double, &[3], &[2.0f64, 2.5, 3.0]);
        let s = h.double(2.5);
        let ob = h.out(ScalarType::Bool, &[3]);
        h.call(super::gt_scalar_out, &[e, s, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![false, false, true]);
    }

    #[test]
    fn empty_tensors() {
        let mut h = OpHarness::new();
        let a = h.f32(&[0, 3], &[]);
        let b = h.f32(&[3], &[1., 2., 3.]);
        let ob = h.out(ScalarType::Bool, &[0, 3]);
        h.call(super::lt_tensor_out, &[a, b, ob, ob]).unwrap();
        assert_eq!(h.sizes(ob), vec![0, 3]);
    }
}
