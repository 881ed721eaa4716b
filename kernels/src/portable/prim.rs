//! ExecuTorch prim ops: the scalar (Int/Double/Bool) arithmetic and shape queries that symbolic
//! shapes compile to. Arguments are `[a, b, result]` (or `[a, result]`); results are written
//! as values with `set_int` / `set_double` / `set_bool`.
//!
//! Python semantics throughout: Int op Int stays Int, anything with a Double is Double, `//`
//! rounds toward -inf, `%` takes the divisor's sign, `/` is always Double.

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, Scalar, Value};

use super::binary::{floor_div_f64, floor_div_i64};

rbuild_runtime::kernel_table! {
    "aten::sym_size.int" => sym_size_int,
    "aten::sym_numel" => sym_numel,
    "aten::_local_scalar_dense" => local_scalar_dense,
    "executorch_prim::add.Scalar" => add,
    "executorch_prim::sub.Scalar" => sub,
    "executorch_prim::mul.Scalar" => mul,
    "executorch_prim::floordiv.Scalar" => floordiv,
    "executorch_prim::floordiv.int" => floordiv,
    "executorch_prim::truediv.Scalar" => truediv,
    "executorch_prim::mod.Scalar" => modulo,
    "executorch_prim::mod.int" => modulo,
    "executorch_prim::eq.Scalar" => eq,
    "executorch_prim::gt.Scalar" => gt,
    "executorch_prim::lt.Scalar" => lt,
    "executorch_prim::ge.Scalar" => ge,
    "executorch_prim::le.Scalar" => le,
    "executorch_prim::neg.Scalar" => neg,
    "executorch_prim::ceil.Scalar" => ceil,
    "executorch_prim::round.Scalar" => round,
    "executorch_prim::trunc.Scalar" => trunc,
    "executorch_prim::sym_float.Scalar" => sym_float,
    "executorch_prim::sym_int.Scalar" => sym_int,
    "executorch_prim::sym_max.Scalar" => sym_max,
    "executorch_prim::sym_min.Scalar" => sym_min,
    "executorch_prim::sym_not.Scalar" => sym_not,
    "executorch_prim::sym_ite.Scalar" => sym_ite,
}

/// A prim operand: Bool counts as Int (as in Python arithmetic).
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Double(f64),
}

impl Num {
    fn f64(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::Double(v) => v,
        }
    }
}

fn num(args: &KernelArgs<'_>, i: usize) -> KernelResult<Num> {
    Ok(match args.scalar(i)? {
        Scalar::Double(d) => Num::Double(d),
        s => Num::Int(s.to_i64()),
    })
}

fn set(args: &KernelArgs<'_>, i: usize, n: Num) -> KernelResult {
    match n {
        Num::Int(v) => args.set_int(i, v),
        Num::Double(v) => args.set_double(i, v),
    }
}

/// `[a, b, result]`: `fi` when both are Int, else `ff` with both as Double.
fn binary(
    args: &KernelArgs<'_>,
    fi: impl Fn(i64, i64) -> KernelResult<i64>,
    ff: impl Fn(f64, f64) -> f64,
) -> KernelResult {
    match (num(args, 0)?, num(args, 1)?) {
        (Num::Int(a), Num::Int(b)) => args.set_int(2, fi(a, b)?),
        (a, b) => args.set_double(2, ff(a.f64(), b.f64())),
    }
}

/// `[a, b, result]` comparison: exact in i64 for two Ints, else in f64.
fn compare(args: &KernelArgs<'_>, fi: impl Fn(i64, i64) -> bool, ff: impl Fn(f64, f64) -> bool) -> KernelResult {
    let r = match (num(args, 0)?, num(args, 1)?) {
        (Num::Int(a), Num::Int(b)) => fi(a, b),
        (a, b) => ff(a.f64(), b.f64()),
    };
    args.set_bool(2, r)
}

/// `[a, result]`: a Double rounded to an Int by `f` (an Int passes through).
fn to_int(args: &KernelArgs<'_>, name: &str, f: impl Fn(f64) -> f64) -> KernelResult {
    match num(args, 0)? {
        Num::Int(v) => args.set_int(1, v),
        Num::Double(d) => {
            let r = f(d);
            // i64::MAX as f64 rounds up to 2^63, which is itself out of range.
            if !(r >= i64::MIN as f64 && r < i64::MAX as f64) {
                return Err(kerr!("{name}: {d} cannot be converted to an integer"));
            }
            args.set_int(1, r as i64)
        }
    }
}

/// Python's `%` on ints: the result takes the divisor's sign; None on division by zero.
fn mod_i64(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let r = a.wrapping_rem(b);
    Some(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

/// Python's `%` on floats: the result takes the divisor's sign.
fn mod_f64(a: f64, b: f64) -> f64 {
    let r = libm::fmod(a, b);
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

macro_rules! prim_kernels {
    ($($(#[$doc:meta])* fn $name:ident($args:ident) $body:block)*) => {$(
        $(#[$doc])*
        pub fn $name(_: &mut KernelContext, $args: &KernelArgs<'_>) -> KernelResult $body
    )*};
}

prim_kernels! {
    /// `aten::sym_size.int(Tensor self, int dim) -> SymInt`: [self, dim, result]. Only the
    /// tensor's metadata is read, never its data.
    fn sym_size_int(args) {
        let sizes = tensor_sizes(args, 0)?;
        let d = normalize_dim(args.int(1)?, sizes.rank())?;
        let size = sizes.as_slice().get(d).copied().unwrap_or(1);
        args.set_int(2, size as i64)
    }
    /// `aten::sym_numel(Tensor self) -> SymInt`: [self, result].
    fn sym_numel(args) {
        let sizes = tensor_sizes(args, 0)?;
        let n = sizes.checked_numel().ok_or_else(|| kerr!("sym_numel: element count of {sizes:?} overflows"))?;
        args.set_int(1, n as i64)
    }
    /// `aten::_local_scalar_dense(Tensor self) -> Scalar` (`tensor.item()`): [self, result].
    /// Reads the one element of an integer, floating or bool tensor.
    fn local_scalar_dense(args) {
        let t = args.tensor(0)?;
        if t.numel() != 1 {
            return Err(kerr!("_local_scalar_dense: needs a one-element tensor, got {:?}", t.sizes()));
        }
        use rbuild_runtime::ScalarType as S;
        match t.dtype {
            S::Long => args.set_int(1, t.data::<i64>()?[0]),
            S::Int => args.set_int(1, t.data::<i32>()?[0] as i64),
            S::Short => args.set_int(1, t.data::<i16>()?[0] as i64),
            S::Char => args.set_int(1, t.data::<i8>()?[0] as i64),
            S::Byte => args.set_int(1, t.data::<u8>()?[0] as i64),
            S::Bool => args.set_bool(1, t.data::<u8>()?[0] != 0),
            S::Float => args.set_double(1, t.data::<f32>()?[0] as f64),
            S::Double => args.set_double(1, t.data::<f64>()?[0]),
            d => Err(kerr!("_local_scalar_dense: dtype {d} is not supported")),
        }
    }
    fn add(args) { binary(args, |a, b| Ok(a.wrapping_add(b)), |a, b| a + b) }
    fn sub(args) { binary(args, |a, b| Ok(a.wrapping_sub(b)), |a, b| a - b) }
    fn mul(args) { binary(args, |a, b| Ok(a.wrapping_mul(b)), |a, b| a * b) }
    /// `floordiv.Scalar` / `floordiv.int`: rounds toward -inf.
    fn floordiv(args) {
        binary(args, |a, b| floor_div_i64(a, b).ok_or_else(|| kerr!("floordiv: integer division by zero")), floor_div_f64)
    }
    /// Always a Double, even for two Ints.
    fn truediv(args) { args.set_double(2, num(args, 0)?.f64() / num(args, 1)?.f64()) }
    /// `mod.Scalar` / `mod.int`: the result takes the divisor's sign (Python).
    fn modulo(args) {
        binary(args, |a, b| mod_i64(a, b).ok_or_else(|| kerr!("mod: integer division by zero")), mod_f64)
    }
    fn eq(args) { compare(args, |a, b| a == b, |a, b| a == b) }
    fn gt(args) { compare(args, |a, b| a > b, |a, b| a > b) }
    fn lt(args) { compare(args, |a, b| a < b, |a, b| a < b) }
    fn ge(args) { compare(args, |a, b| a >= b, |a, b| a >= b) }
    fn le(args) { compare(args, |a, b| a <= b, |a, b| a <= b) }
    fn neg(args) {
        match num(args, 0)? {
            Num::Int(v) => args.set_int(1, v.wrapping_neg()),
            Num::Double(d) => args.set_double(1, -d),
        }
    }
    fn ceil(args) { to_int(args, "ceil", libm::ceil) }
    /// Half to even, as Python's `round`.
    fn round(args) { to_int(args, "round", libm::rint) }
    fn trunc(args) { to_int(args, "trunc", libm::trunc) }
    fn sym_int(args) { to_int(args, "sym_int", libm::trunc) }
    fn sym_float(args) { args.set_double(1, num(args, 0)?.f64()) }
    /// Int for two Ints, else Double.
    fn sym_max(args) { binary(args, |a, b| Ok(a.max(b)), f64::max) }
    fn sym_min(args) { binary(args, |a, b| Ok(a.min(b)), f64::min) }
    fn sym_not(args) {
        let v = match args.scalar(0)? {
            Scalar::Bool(b) => b,
            s => s.to_f64() != 0.0,
        };
        args.set_bool(1, !v)
    }
    /// `sym_ite(Scalar b, Scalar t, Scalar f)`: [b, t, f, result]; `t` if `b` else `f`, kept as
    /// its own kind.
    fn sym_ite(args) {
        let pick = if args.bool(0)? { 1 } else { 2 };
        match args.scalar(pick)? {
            Scalar::Bool(b) => args.set_bool(3, b),
            s => set(args, 3, if s.is_floating() { Num::Double(s.to_f64()) } else { Num::Int(s.to_i64()) }),
        }
    }
}

/// A tensor argument's sizes from its metadata (the tensor may have no data bound).
fn tensor_sizes(args: &KernelArgs<'_>, i: usize) -> KernelResult<rbuild_runtime::tensor::Shape> {
    match args.value(i)? {
        Value::Tensor(t) => Ok(t.shape),
        v => Err(kerr!("argument {i}: expected Tensor, found {}", v.kind())),
    }
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::{ScalarType, Value};

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum V {
        I(i64),
        D(f64),
        B(bool),
    }

    fn push(h: &mut OpHarness, v: V) -> u32 {
        match v {
            V::I(x) => h.int(x),
            V::D(x) => h.double(x),
            V::B(x) => h.bool(x),
        }
    }

    /// Calls `k` on `inputs` plus a result slot and returns the result value.
    fn call(k: KernelFn, inputs: &[V]) -> Result<V, alloc::string::String> {
        let mut h = OpHarness::new();
        let mut ids: alloc::vec::Vec<u32> = inputs.iter().map(|&v| push(&mut h, v)).collect();
        let r = h.none();
        ids.push(r);
        h.call(k, &ids).map_err(|e| e.message)?;
        Ok(match h.value(r) {
            Value::Int(v) => V::I(*v),
            Value::Double(v) => V::D(*v),
            Value::Bool(v) => V::B(*v),
            v => panic!("unexpected result {v:?}"),
        })
    }

    use V::{B, D, I};

    #[test]
    fn arithmetic_keeps_int_and_promotes_double() {
        assert_eq!(call(super::add, &[I(2), I(3)]), Ok(I(5)));
        assert_eq!(call(super::add, &[I(2), D(0.5)]), Ok(D(2.5)));
        assert_eq!(call(super::sub, &[I(2), I(7)]), Ok(I(-5)));
        assert_eq!(call(super::mul, &[D(1.5), I(4)]), Ok(D(6.0)));
        assert_eq!(call(super::mul, &[B(true), I(4)]), Ok(I(4)));
        assert_eq!(call(super::truediv, &[I(7), I(2)]), Ok(D(3.5)));
        assert_eq!(call(super::neg, &[I(3)]), Ok(I(-3)));
        assert_eq!(call(super::neg, &[D(1.5)]), Ok(D(-1.5)));
    }

    #[test]
    fn floordiv_and_mod_follow_python() {
        for (a, b, q, r) in
            [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1), (6, 3, 2, 0), (-6, 3, -2, 0)]
        {
            assert_eq!(call(super::floordiv, &[I(a), I(b)]), Ok(I(q)), "{a} // {b}");
            assert_eq!(call(super::modulo, &[I(a), I(b)]), Ok(I(r)), "{a} % {b}");
        }
        assert_eq!(call(super::floordiv, &[D(7.5), I(2)]), Ok(D(3.0)));
        assert_eq!(call(super::floordiv, &[D(-7.5), I(2)]), Ok(D(-4.0)));
        assert_eq!(call(super::modulo, &[D(-7.5), I(2)]), Ok(D(0.5)));
        assert!(call(super::floordiv, &[I(1), I(0)]).unwrap_err().contains("division by zero"));
        assert!(call(super::modulo, &[I(1), I(0)]).unwrap_err().contains("division by zero"));
    }

    #[test]
    fn comparisons_and_not() {
        assert_eq!(call(super::eq, &[I(3), I(3)]), Ok(B(true)));
        assert_eq!(call(super::eq, &[I(3), D(3.0)]), Ok(B(true)));
        assert_eq!(call(super::gt, &[I(3), I(2)]), Ok(B(true)));
        assert_eq!(call(super::lt, &[D(2.5), I(2)]), Ok(B(false)));
        assert_eq!(call(super::ge, &[I(2), I(2)]), Ok(B(true)));
        assert_eq!(call(super::le, &[I(3), I(2)]), Ok(B(false)));
        assert_eq!(call(super::sym_not, &[B(true)]), Ok(B(false)));
        assert_eq!(call(super::sym_not, &[I(0)]), Ok(B(true)));
    }

    #[test]
    fn rounding_and_conversions() {
        assert_eq!(call(super::ceil, &[D(2.1)]), Ok(I(3)));
        assert_eq!(call(super::ceil, &[D(-2.1)]), Ok(I(-2)));
        assert_eq!(call(super::ceil, &[I(5)]), Ok(I(5)));
        assert_eq!(call(super::round, &[D(2.5)]), Ok(I(2)));
        assert_eq!(call(super::round, &[D(3.5)]), Ok(I(4)));
        assert_eq!(call(super::round, &[D(-2.6)]), Ok(I(-3)));
        assert_eq!(call(super::trunc, &[D(-2.9)]), Ok(I(-2)));
        assert_eq!(call(super::sym_int, &[D(7.9)]), Ok(I(7)));
        assert_eq!(call(super::sym_float, &[I(7)]), Ok(D(7.0)));
        assert!(call(super::trunc, &[D(f64::NAN)]).unwrap_err().contains("integer"));
    }

    #[test]
    fn max_min_ite() {
        assert_eq!(call(super::sym_max, &[I(3), I(9)]), Ok(I(9)));
        assert_eq!(call(super::sym_min, &[I(3), I(9)]), Ok(I(3)));
        assert_eq!(call(super::sym_max, &[I(3), D(2.5)]), Ok(D(3.0)));
        assert_eq!(call(super::sym_ite, &[B(true), I(1), D(2.0)]), Ok(I(1)));
        assert_eq!(call(super::sym_ite, &[B(false), I(1), D(2.0)]), Ok(D(2.0)));
    }

    #[test]
    fn sym_size_and_numel() {
        let mut h = OpHarness::new();
        let t = h.out(ScalarType::Float, &[2, 5, 3]);
        let (d1, dm1, d3, r) = (h.int(1), h.int(-1), h.int(3), h.none());
        h.call(super::sym_size_int, &[t, d1, r]).unwrap();
        assert!(matches!(h.value(r), Value::Int(5)));
        h.call(super::sym_size_int, &[t, dm1, r]).unwrap();
        assert!(matches!(h.value(r), Value::Int(3)));
        let e = h.call(super::sym_size_int, &[t, d3, r]).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        h.call(super::sym_numel, &[t, r]).unwrap();
        assert!(matches!(h.value(r), Value::Int(30)));
        let not_tensor = h.int(4);
        assert!(h.call(super::sym_numel, &[not_tensor, r]).is_err());
    }

    #[test]
    fn local_scalar_dense_reads_the_one_element() {
        let mut h = OpHarness::new();
        let r = h.none();
        let pos = h.tensor::<i64>(ScalarType::Long, &[1], &[17]);
        h.call(super::local_scalar_dense, &[pos, r]).unwrap();
        assert!(matches!(h.value(r), Value::Int(17)));
        let x = h.tensor::<f32>(ScalarType::Float, &[1, 1], &[2.5]);
        h.call(super::local_scalar_dense, &[x, r]).unwrap();
        assert!(matches!(h.value(r), Value::Double(d) if *d == 2.5));
        let two = h.tensor::<i64>(ScalarType::Long, &[2], &[1, 2]);
        let e = h.call(super::local_scalar_dense, &[two, r]).unwrap_err();
        assert!(e.message.contains("one-element"), "{e}");
    }
}
