//! Elementwise bitwise (`&`, `|`, `^` on integer/bool) and logical (truth-value) binary ops with
//! broadcasting. All-bool bitwise ops run a typed row loop; the rest compute in i64 or bool.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use super::binary::{broadcast_plan, broadcast_rows, view, Operand};
use super::util::{for_each_broadcast, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::bitwise_and.Tensor_out" => bitwise_and_tensor_out,
    "aten::bitwise_and.Scalar_out" => bitwise_and_scalar_out,
    "aten::bitwise_or.Tensor_out" => bitwise_or_tensor_out,
    "aten::bitwise_or.Scalar_out" => bitwise_or_scalar_out,
    "aten::bitwise_xor.Tensor_out" => bitwise_xor_tensor_out,
    "aten::bitwise_xor.Scalar_out" => bitwise_xor_scalar_out,
    "aten::logical_and.out" => logical_and_out,
    "aten::logical_or.out" => logical_or_out,
    "aten::logical_xor.out" => logical_xor_out,
}

/// Bitwise op on integer/bool inputs, computed in i64 (a bool out stores `!= 0`).
fn bitwise(args: &KernelArgs<'_>, b: Operand<'_>, name: &str, f: impl Fn(i64, i64) -> i64) -> KernelResult {
    let a = Operand::tensor(args, 0)?;
    if !a.is_integral() || !b.is_integral() {
        return Err(kerr!("{name}: needs integer or bool inputs, got {:?} and {:?}", a.dtype(), b.dtype()));
    }
    let mut to = args.out(2)?;
    let (sizes, st) = broadcast_plan(&[a, b], &to)?;
    to.resize(&sizes)?;
    if to.dtype == ScalarType::Bool && a.dtype() == Some(ScalarType::Bool) && b.dtype() == Some(ScalarType::Bool) {
        let (mut ca, mut cb) = ([0u8], [0u8]);
        if let (Some(xa), Some(xb)) = (view(a, &mut ca, |_| None), view(b, &mut cb, |_| None)) {
            let o = to.data_mut::<u8>()?;
            broadcast_rows(&sizes, &st[0], &st[1], xa, xb, o, |x, y| (f((x != 0) as i64, (y != 0) as i64) != 0) as u8);
            return Ok(());
        }
    }
    let (ea, eb) = (a.src(b.dtype())?, b.src(a.dtype())?);
    let mut eo = ElemsMut::of(&mut to)?;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| eo.set_i64(o, f(ea.i64(i), eb.i64(j))));
    Ok(())
}

/// Logical op: inputs of any dtype are read as `!= 0`; the out gets 0/1 in its own dtype.
fn logical(args: &KernelArgs<'_>, name: &str, f: impl Fn(bool, bool) -> bool) -> KernelResult {
    let (a, b) = (Operand::tensor(args, 0)?, Operand::tensor(args, 1)?);
    let mut to = args.out(2)?;
    let (sizes, st) = broadcast_plan(&[a, b], &to)?;
    to.resize(&sizes)?;
    let (ea, eb) = (a.src(None)?, b.src(None)?);
    let mut eo = ElemsMut::of(&mut to).map_err(|e| kerr!("{name}: {}", e.message))?;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |o, [i, j]| eo.set_bool(o, f(ea.bool(i), eb.bool(j))));
    Ok(())
}

macro_rules! bitwise_kernels {
    ($($tensor_fn:ident, $scalar_fn:ident, $op:tt;)*) => {$(
        pub fn $tensor_fn(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            bitwise(args, Operand::tensor(args, 1)?, stringify!($tensor_fn), |x, y| x $op y)
        }
        pub fn $scalar_fn(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
            bitwise(args, Operand::scalar(args, 1)?, stringify!($scalar_fn), |x, y| x $op y)
        }
    )*};
}
bitwise_kernels! {
    bitwise_and_tensor_out, bitwise_and_scalar_out, &;
    bitwise_or_tensor_out, bitwise_or_scalar_out, |;
    bitwise_xor_tensor_out, bitwise_xor_scalar_out, ^;
}

/// `logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_and_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    logical(args, "logical_and.out", |x, y| x && y)
}

/// `logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_or_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    logical(args, "logical_or.out", |x, y| x || y)
}

/// `logical_xor.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_xor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    logical(args, "logical_xor.out", |x, y| x != y)
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn bitwise_bool_and_int64_broadcast() {
        let mut h = OpHarness::new();
        let a = h.bool_tensor(&[4], &[true, true, false, false]);
        let b = h.bool_tensor(&[4], &[true, false, true, false]);
        let o = h.out(ScalarType::Bool, &[4]);
        h.call(super::bitwise_and_tensor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, false, false, false]);
        h.call(super::bitwise_or_tensor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, true, true, false]);
        h.call(super::bitwise_xor_tensor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![false, true, true, false]);

        let x = h.i64(&[2, 2], &[12, 5, -1, 0]);
        let y = h.i64(&[2], &[10, 3]);
        let oi = h.out(ScalarType::Long, &[2, 2]);
        h.call(super::bitwise_and_tensor_out, &[x, y, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![8, 1, 10, 0]);
        let s = h.int(6);
        h.call(super::bitwise_xor_scalar_out, &[x, s, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![10, 3, -7, 6]);

        let f = h.f32(&[1], &[1.]);
        let of = h.out(ScalarType::Float, &[1]);
        let e = h.call(super::bitwise_and_tensor_out, &[f, f, of, of]).unwrap_err();
        assert!(e.message.contains("integer or bool"), "{e}");
    }

    #[test]
    fn logical_ops_read_nonzero() {
        let mut h = OpHarness::new();
        let a = h.f32(&[3], &[0., 2., -1.]);
        let b = h.i64(&[3], &[5, 0, 3]);
        let o = h.out(ScalarType::Bool, &[3]);
        h.call(super::logical_and_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![false, false, true]);
        h.call(super::logical_or_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, true, true]);
        h.call(super::logical_xor_out, &[a, b, o, o]).unwrap();
        assert_eq!(h.read_bool(o), vec![true, true, false]);
    }
}
