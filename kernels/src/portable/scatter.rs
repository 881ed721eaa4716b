//! Writes along a dim at positions an index tensor names: `scatter` (src / value),
//! `scatter_add`, `scatter_reduce`. Plain writes copy raw element bytes, so they work for every
//! dtype; accumulating writes compute in the element type, as PyTorch's CPU kernels do
//! (integers wrap, Half/BFloat16 round after every step).

use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::kernel::{normalize_dim, Element, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, Scalar, ScalarType};

use super::index::{check_io, contiguous_strides, index_values};
use super::util::{for_each_broadcast, require_contiguous};

rbuild_runtime::kernel_table! {
    "aten::scatter.src_out" => scatter_src_out,
    "aten::scatter.value_out" => scatter_value_out,
    "aten::scatter_add.out" => scatter_add_out,
    "aten::scatter_reduce.two_out" => scatter_reduce_two_out,
}

// ---------------------------------------------------------------------------------------------
// Element arithmetic
// ---------------------------------------------------------------------------------------------

/// Arithmetic in the element type, as PyTorch's CPU kernels do it.
trait Arith: Element + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    const LOWEST: Self;
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
    /// `self / count`: true division for floats, floor division for integers.
    fn div_count(self, count: usize) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn is_nan(self) -> bool { false }
            fn div_count(self, count: usize) -> Self { (self as i128).div_euclid(count.max(1) as i128) as $t }
        }
    )*};
}
int_arith!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            fn is_nan(self) -> bool { self.is_nan() }
            fn div_count(self, count: usize) -> Self { self / count as $t }
        }
    )*};
}
float_arith!(f32, f64);

// Half and BFloat16 compute in f32 and round the result back, like c10::Half's operators.
macro_rules! half_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            fn is_nan(self) -> bool { self.is_nan() }
            fn div_count(self, count: usize) -> Self {
                <$t>::from_f32(self.to_f32() / <$t>::from_f32(count as f32).to_f32())
            }
        }
    )*};
}
half_arith!(f16, bf16);

/// Runs `$body` with `$T` bound to the element type of `$dtype` (u8 for Bool: callers
/// normalize bool results with [`normalize_bool`]).
macro_rules! with_arith {
    ($dtype:expr, $what:expr, $T:ident => $body:expr) => {
        match $dtype {
            ScalarType::Float => { type $T = f32; $body }
            ScalarType::Double => { type $T = f64; $body }
            ScalarType::Half => { type $T = f16; $body }
            ScalarType::BFloat16 => { type $T = bf16; $body }
            ScalarType::Char => { type $T = i8; $body }
            ScalarType::Byte | ScalarType::Bool => { type $T = u8; $body }
            ScalarType::Short => { type $T = i16; $body }
            ScalarType::Int => { type $T = i32; $body }
            ScalarType::Long => { type $T = i64; $body }
            ScalarType::UInt16 => { type $T = u16; $body }
            ScalarType::UInt32 => { type $T = u32; $body }
            ScalarType::UInt64 => { type $T = u64; $body }
            d => Err(kerr!("{}: dtype {d} is not supported", $what)),
        }
    };
}

/// Bool sums computed on u8 can reach 2; PyTorch's bool `+` is a logical or.
fn normalize_bool(out: &mut TensorMut<'_>) {
    if out.dtype == ScalarType::Bool {
        out.bytes_mut().iter_mut().for_each(|b| *b = (*b != 0) as u8);
    }
}

/// The reductions of `scatter_reduce` (`scatter_add` is `Sum`).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Reduce {
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

impl Reduce {
    fn parse(s: &str) -> KernelResult<Reduce> {
        Ok(match s {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" => Reduce::Amax,
            "amin" => Reduce::Amin,
            _ => return Err(kerr!("scatter_reduce: reduce must be one of sum, prod, mean, amax, amin; got {s:?}")),
        })
    }

    /// The value a position starts from when `include_self` is false.
    fn identity<T: Arith>(self) -> T {
        match self {
            Reduce::Sum | Reduce::Mean => T::ZERO,
            Reduce::Prod => T::ONE,
            Reduce::Amax => T::LOWEST,
            Reduce::Amin => T::HIGHEST,
        }
    }

    /// Folds `v` into `acc`; amax/amin propagate NaN from either side (std::max/min keep a NaN
    /// accumulator, and a NaN source wins explicitly).
    #[inline]
    fn combine<T: Arith>(self, acc: T, v: T) -> T {
        match self {
            Reduce::Sum | Reduce::Mean => acc.add(v),
            Reduce::Prod => acc.mul(v),
            Reduce::Amax => {
                if v.is_nan() || acc < v {
                    v
                } else {
                    acc
                }
            }
            Reduce::Amin => {
                if v.is_nan() || v < acc {
                    v
                } else {
                    acc
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scalars as elements
// ---------------------------------------------------------------------------------------------

/// `value` as one element of `dtype` (native-endian bytes). Values the dtype cannot hold are
/// refused as PyTorch's checked Scalar conversion does: out-of-range integers and finite
/// floats, NaN/inf into integers. Unsigned types accept negative integers down to -max
/// (two's-complement wrap), bool accepts -1..=1.
pub(super) fn scalar_element(dtype: ScalarType, value: Scalar, what: &str) -> KernelResult<Vec<u8>> {
    let overflow = || kerr!("{what}: value {value:?} cannot be converted to {dtype} without overflow");
    if dtype.is_floating() {
        let v = value.to_f64();
        let max = match dtype {
            ScalarType::Float => f32::MAX as f64,
            ScalarType::Half => f16::MAX.to_f64(),
            ScalarType::BFloat16 => bf16::MAX.to_f64(),
            _ => f64::MAX,
        };
        if v.is_finite() && v.abs() > max {
            return Err(overflow());
        }
        return Ok(match dtype {
            ScalarType::Float => (v as f32).to_ne_bytes().to_vec(),
            ScalarType::Half => f16::from_f64(v).to_ne_bytes().to_vec(),
            ScalarType::BFloat16 => bf16::from_f64(v).to_ne_bytes().to_vec(),
            _ => v.to_ne_bytes().to_vec(),
        });
    }
    let (lo, hi): (i128, i128) = match dtype {
        ScalarType::Bool => (0, 1),
        ScalarType::Byte => (0, u8::MAX as i128),
        ScalarType::Char => (i8::MIN as i128, i8::MAX as i128),
        ScalarType::Short => (i16::MIN as i128, i16::MAX as i128),
        ScalarType::Int => (i32::MIN as i128, i32::MAX as i128),
        ScalarType::Long => (i64::MIN as i128, i64::MAX as i128),
        ScalarType::UInt16 => (0, u16::MAX as i128),
        ScalarType::UInt32 => (0, u32::MAX as i128),
        ScalarType::UInt64 => (0, u64::MAX as i128),
        d => return Err(kerr!("{what}: dtype {d} is not supported")),
    };
    let v: i128 = match value {
        Scalar::Bool(b) => b as i128,
        Scalar::Int(i) => {
            let i = i as i128;
            // Unsigned targets (bool included) let negative integers wrap down to -max.
            if i > hi || (lo == 0 && i < -hi) || (lo < 0 && i < lo) {
                return Err(overflow());
            }
            i
        }
        Scalar::Double(d) => {
            if d.is_nan() || d < lo as f64 || d > hi as f64 {
                return Err(overflow());
            }
            d as i128
        }
    };
    let bits = v as i64;
    Ok(match dtype {
        // A fraction is true as a bool, not truncated to 0.
        ScalarType::Bool => vec![(value.to_f64() != 0.0) as u8],
        ScalarType::Byte => vec![bits as u8],
        ScalarType::Char => (bits as i8).to_ne_bytes().to_vec(),
        ScalarType::Short => (bits as i16).to_ne_bytes().to_vec(),
        ScalarType::Int => (bits as i32).to_ne_bytes().to_vec(),
        ScalarType::UInt16 => (bits as u16).to_ne_bytes().to_vec(),
        ScalarType::UInt32 => (bits as u32).to_ne_bytes().to_vec(),
        ScalarType::UInt64 => (v as u64).to_ne_bytes().to_vec(),
        _ => bits.to_ne_bytes().to_vec(),
    })
}

// ---------------------------------------------------------------------------------------------
// scatter, scatter_add, scatter_reduce
// ---------------------------------------------------------------------------------------------

/// A checked scatter: for every element of `index` (row-major, the order PyTorch's CPU kernel
/// applies them), the (output element, source element) pair it writes.
type Writes = Vec<(usize, usize)>;

/// A rank-0 tensor takes part in scatter as a 1-element vector (PyTorch's nonempty dims).
fn nonempty(sizes: &[usize]) -> Vec<usize> {
    if sizes.is_empty() {
        vec![1]
    } else {
        sizes.to_vec()
    }
}

/// PyTorch's scatter checks: index is Long or Int with as many dims as self (and src);
/// index.size(d) <= self.size(d) for d != dim and <= src.size(d) for every d; every index in
/// `0..self.size(dim)` (scatter does not wrap negative indices). An empty index writes nothing.
fn scatter_plan(
    what: &str,
    self_sizes: &[usize],
    dim: i64,
    index: &TensorRef<'_>,
    src_sizes: Option<&[usize]>,
) -> KernelResult<Writes> {
    let d = normalize_dim(dim, self_sizes.len())?;
    if !matches!(index.dtype, ScalarType::Long | ScalarType::Int) {
        return Err(kerr!("{what}: index must be a Long or Int tensor, got {}", index.dtype));
    }
    if index.numel() == 0 {
        return Ok(Vec::new());
    }
    let ssz = nonempty(self_sizes);
    let isz = nonempty(index.sizes());
    if isz.len() != ssz.len() {
        return Err(kerr!("{what}: index of shape {:?} must have as many dims as self of shape {self_sizes:?}", index.sizes()));
    }
    if (0..ssz.len()).any(|k| k != d && isz[k] > ssz[k]) {
        return Err(kerr!("{what}: index of shape {:?} is larger than self of shape {self_sizes:?} apart from dim {d}", index.sizes()));
    }
    let src_strides = match src_sizes {
        Some(src) => {
            let src = nonempty(src);
            if src.len() != ssz.len() || (0..ssz.len()).any(|k| isz[k] > src[k]) {
                return Err(kerr!("{what}: index of shape {:?} is larger than src of shape {src:?} (or their ranks differ)", index.sizes()));
            }
            contiguous_strides(&src)
        }
        None => vec![0; ssz.len()],
    };
    let ids = index_values(index, what)?;
    let out_strides = contiguous_strides(&ssz);
    let mut partial = out_strides.clone();
    partial[d] = 0;
    let size = ssz[d];
    let mut writes = Vec::with_capacity(ids.len());
    let mut bad = None;
    for_each_broadcast(&isz, [&partial, &src_strides], |o, [out_off, src_off]| {
        let v = ids[o];
        if v < 0 || v as u64 >= size as u64 {
            bad.get_or_insert(v);
        } else {
            writes.push((out_off + v as usize * out_strides[d], src_off));
        }
    });
    match bad {
        Some(v) => Err(kerr!("{what}: index {v} is out of bounds for dim {d} of size {size}")),
        None => Ok(writes),
    }
}

/// The shared start of the scatter kernels: checks self/out (and src) and copies self to out.
fn scatter_start<'a>(
    what: &str,
    inp: &TensorRef<'_>,
    src: Option<&TensorRef<'_>>,
    out: &mut TensorMut<'a>,
) -> KernelResult {
    check_io(inp, out, what)?;
    if let Some(src) = src {
        if src.dtype != inp.dtype {
            return Err(kerr!("{what}: src dtype {} differs from self dtype {}", src.dtype, inp.dtype));
        }
        require_contiguous(src, what)?;
    }
    out.resize(inp.sizes())?;
    out.bytes_mut().copy_from_slice(inp.bytes());
    Ok(())
}

/// `scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)`:
/// args = [self, dim, index, src, out, out]. out = self, then out[p with p[dim] = index[p]] =
/// src[p] for every p of index; with repeated indices the last write wins.
pub fn scatter_src_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "scatter.src_out";
    let (inp, index, src) = (args.tensor(0)?, args.tensor(2)?, args.tensor(3)?);
    let mut out = args.out(4)?;
    let writes = scatter_plan(WHAT, inp.sizes(), args.int(1)?, &index, Some(src.sizes()))?;
    scatter_start(WHAT, &inp, Some(&src), &mut out)?;
    let es = inp.dtype.size();
    let (s, dst) = (src.bytes(), out.bytes_mut());
    for &(o, i) in &writes {
        dst[o * es..(o + 1) * es].copy_from_slice(&s[i * es..(i + 1) * es]);
    }
    Ok(())
}

/// `scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out)`:
/// args = [self, dim, index, value, out, out]. Like `scatter.src_out` with a constant source.
pub fn scatter_value_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "scatter.value_out";
    let (inp, index) = (args.tensor(0)?, args.tensor(2)?);
    let mut out = args.out(4)?;
    let writes = scatter_plan(WHAT, inp.sizes(), args.int(1)?, &index, None)?;
    let value = scalar_element(inp.dtype, args.scalar(3)?, WHAT)?;
    scatter_start(WHAT, &inp, None, &mut out)?;
    let es = value.len();
    let dst = out.bytes_mut();
    for &(o, _) in &writes {
        dst[o * es..(o + 1) * es].copy_from_slice(&value);
    }
    Ok(())
}

/// Folds the planned source elements into `out` (which holds self). Without `include_self`,
/// every written position first drops self's value for the reduction's identity; `mean`
/// divides each written position by its count (self included when `include_self`).
fn scatter_fold<T: Arith>(out: &mut [T], src: &[T], writes: &[(usize, usize)], reduce: Reduce, include_self: bool) {
    if !include_self {
        for &(o, _) in writes {
            out[o] = reduce.identity();
        }
    }
    let mut counts = if reduce == Reduce::Mean { vec![0usize; out.len()] } else { Vec::new() };
    for &(o, i) in writes {
        out[o] = reduce.combine(out[o], src[i]);
        if let Some(c) = counts.get_mut(o) {
            *c += 1;
        }
    }
    for (o, &c) in counts.iter().enumerate() {
        if c > 0 {
            out[o] = out[o].div_count(c + include_self as usize);
        }
    }
}

/// The typed part of `scatter_add` / `scatter_reduce`: out already holds self.
fn scatter_reduce_into(
    what: &str,
    out: &mut TensorMut<'_>,
    src: &TensorRef<'_>,
    writes: &[(usize, usize)],
    reduce: Reduce,
    include_self: bool,
) -> KernelResult {
    if out.dtype == ScalarType::Bool && reduce == Reduce::Mean {
        return Err(kerr!("{what}: reduce \"mean\" is not supported for Bool tensors"));
    }
    with_arith!(out.dtype, what, T => {
        let s = src.data::<T>()?;
        scatter_fold::<T>(out.data_mut::<T>()?, s, writes, reduce, include_self);
        Ok::<(), rbuild_runtime::KernelError>(())
    })?;
    normalize_bool(out);
    Ok(())
}

/// `out[o] += src[i]` for every (o, i) of `writes` in order, in the element type (index_put's
/// accumulation; bool adds are a logical or).
pub(super) fn add_elements(what: &str, out: &mut TensorMut<'_>, src: &TensorRef<'_>, writes: &[(usize, usize)]) -> KernelResult {
    scatter_reduce_into(what, out, src, writes, Reduce::Sum, true)
}

/// `scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)`:
/// args = [self, dim, index, src, out, out]. out = self, then out[p with p[dim] = index[p]] +=
/// src[p]; repeated indices accumulate in index order.
pub fn scatter_add_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "scatter_add.out";
    let (inp, index, src) = (args.tensor(0)?, args.tensor(2)?, args.tensor(3)?);
    let mut out = args.out(4)?;
    let writes = scatter_plan(WHAT, inp.sizes(), args.int(1)?, &index, Some(src.sizes()))?;
    scatter_start(WHAT, &inp, Some(&src), &mut out)?;
    scatter_reduce_into(WHAT, &mut out, &src, &writes, Reduce::Sum, true)
}

/// `scatter_reduce.two_out(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
/// bool include_self=True, Tensor(a!) out)`: args = [self, dim, index, src, reduce,
/// include_self, out, out]. Reduces src into self's positions with sum / prod / mean / amax /
/// amin; positions no index names keep self's value. Integer means floor-divide.
pub fn scatter_reduce_two_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "scatter_reduce.two_out";
    let (inp, index, src) = (args.tensor(0)?, args.tensor(2)?, args.tensor(3)?);
    let reduce = Reduce::parse(args.string(4)?)?;
    let include_self = args.bool(5)?;
    let mut out = args.out(6)?;
    let writes = scatter_plan(WHAT, inp.sizes(), args.int(1)?, &index, Some(src.sizes()))?;
    scatter_start(WHAT, &inp, Some(&src), &mut out)?;
    scatter_reduce_into(WHAT, &mut out, &src, &writes, reduce, include_self)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::iota;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::Value;

    trait PushString {
        fn push_string(&mut self, s: &str) -> u32;
    }
    impl PushString for OpHarness {
        fn push_string(&mut self, s: &str) -> u32 {
            self.frame.values.push(Value::String(s.into()));
            (self.frame.values.len() - 1) as u32
        }
    }

    #[test]
    fn scatter_src_dim1_last_write_wins() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0.; 6]);
        let d = h.int(1);
        let i = h.i64(&[2, 2], &[2, 0, 1, 1]);
        let s = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(scatter_src_out, &[x, d, i, s, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![2., 0., 1., 0., 5., 0.]);
    }

    #[test]
    fn scatter_src_int32_index_dim0_and_rank0() {
        let mut h = OpHarness::new();
        let x = h.i64(&[3, 2], &[1, 1, 1, 1, 1, 1]);
        let d = h.int(0);
        let i = h.tensor::<i32>(ScalarType::Int, &[1, 2], &[2, 0]);
        let s = h.i64(&[2, 2], &[7, 8, 9, 10]);
        let out = h.out(ScalarType::Long, &[3, 2]);
        h.call(scatter_src_out, &[x, d, i, s, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 8, 1, 1, 7, 1]);

        let x0 = h.f32(&[], &[1.]);
        let i0 = h.i64(&[], &[0]);
        let s0 = h.f32(&[], &[5.]);
        let out0 = h.out(ScalarType::Float, &[]);
        h.call(scatter_src_out, &[x0, d, i0, s0, out0, out0]).unwrap();
        assert_eq!(h.read::<f32>(out0), vec![5.]);
    }

    #[test]
    fn scatter_rejects_bad_indices_and_shapes() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let (d, d2) = (h.int(1), h.int(2));
        let s = h.f32(&[2, 3], &iota(6));
        let out = h.out(ScalarType::Float, &[2, 3]);
        let neg = h.i64(&[2, 1], &[0, -1]);
        let e = h.call(scatter_src_out, &[x, d, neg, s, out, out]).unwrap_err();
        assert!(e.message.contains("index -1") && e.message.contains("out of bounds"), "{e}");
        let big = h.i64(&[2, 1], &[3, 0]);
        assert!(h.call(scatter_src_out, &[x, d, big, s, out, out]).unwrap_err().message.contains("index 3"));
        let ok = h.i64(&[2, 1], &[0, 1]);
        assert!(h.call(scatter_src_out, &[x, d2, ok, s, out, out]).is_err());
        let fidx = h.f32(&[2, 1], &[0., 1.]);
        assert!(h.call(scatter_src_out, &[x, d, fidx, s, out, out]).is_err());
        let wide = h.i64(&[3, 1], &[0, 1, 2]);
        assert!(h.call(scatter_src_out, &[x, d, wide, s, out, out]).is_err());
        let rank1 = h.i64(&[2], &[0, 1]);
        assert!(h.call(scatter_src_out, &[x, d, rank1, s, out, out]).is_err());
        let small_src = h.f32(&[2, 1], &[1., 2.]);
        let two = h.i64(&[2, 2], &[0, 1, 1, 0]);
        assert!(h.call(scatter_src_out, &[x, d, two, small_src, out, out]).is_err());
        let src64 = h.tensor::<f64>(ScalarType::Double, &[2, 3], &[0.; 6]);
        assert!(h.call(scatter_src_out, &[x, d, ok, src64, out, out]).is_err());
        let wrong_out = h.out(ScalarType::Float, &[3, 2]);
        assert!(h.call(scatter_src_out, &[x, d, ok, s, wrong_out, wrong_out]).is_err());
        // An empty index is a copy, whatever its shape.
        let empty = h.i64(&[0], &[]);
        h.call(scatter_src_out, &[x, d, empty, s, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), iota(6));
    }

    #[test]
    fn scatter_value_converts_and_checks_range() {
        let mut h = OpHarness::new();
        let x = h.tensor::<i8>(ScalarType::Char, &[4], &[1, 2, 3, 4]);
        let d = h.int(-1);
        let i = h.i64(&[2], &[3, 1]);
        let out = h.out(ScalarType::Char, &[4]);
        let v = h.int(-100);
        h.call(scatter_value_out, &[x, d, i, v, out, out]).unwrap();
        assert_eq!(h.read::<i8>(out), vec![1, -100, 3, -100]);
        let big = h.int(200);
        assert!(h.call(scatter_value_out, &[x, d, i, big, out, out]).unwrap_err().message.contains("overflow"));
        let nan = h.double(f64::NAN);
        assert!(h.call(scatter_value_out, &[x, d, i, nan, out, out]).is_err());

        let xh = h.tensor(ScalarType::Half, &[2], &[f16::ZERO; 2]);
        let ih = h.i64(&[1], &[1]);
        let outh = h.out(ScalarType::Half, &[2]);
        let v = h.double(2.5);
        h.call(scatter_value_out, &[xh, d, ih, v, outh, outh]).unwrap();
        assert_eq!(h.read::<f16>(outh), vec![f16::ZERO, f16::from_f32(2.5)]);
        let huge = h.double(1e6);
        assert!(h.call(scatter_value_out, &[xh, d, ih, huge, outh, outh]).is_err());
    }

    #[test]
    fn scalar_element_conversions() {
        let b = |d, v| scalar_element(d, v, "t");
        assert_eq!(b(ScalarType::Byte, Scalar::Int(-1)).unwrap(), vec![255]);
        assert!(b(ScalarType::Byte, Scalar::Int(-256)).is_err());
        assert!(b(ScalarType::Byte, Scalar::Double(-1.0)).is_err());
        assert_eq!(b(ScalarType::Bool, Scalar::Int(-1)).unwrap(), vec![1]);
        assert!(b(ScalarType::Bool, Scalar::Int(2)).is_err());
        assert_eq!(b(ScalarType::Bool, Scalar::Double(0.5)).unwrap(), vec![1]);
        assert_eq!(b(ScalarType::Int, Scalar::Double(-2.7)).unwrap(), (-2i32).to_ne_bytes().to_vec());
        assert!(b(ScalarType::Long, Scalar::Double(f64::INFINITY)).is_err());
        assert_eq!(b(ScalarType::Float, Scalar::Double(f64::NEG_INFINITY)).unwrap(), f32::NEG_INFINITY.to_ne_bytes().to_vec());
        assert!(b(ScalarType::Float, Scalar::Double(1e300)).is_err());
        assert_eq!(b(ScalarType::Double, Scalar::Bool(true)).unwrap(), 1f64.to_ne_bytes().to_vec());
    }

    #[test]
    fn scatter_add_accumulates_duplicates() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1.; 6]);
        let d = h.int(1);
        let i = h.i64(&[2, 3], &[0, 0, 2, 1, 1, 1]);
        let s = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(scatter_add_out, &[x, d, i, s, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![4., 1., 4., 1., 16., 1.]);
    }

    #[test]
    fn scatter_add_wraps_ints_ors_bools_rounds_half() {
        let mut h = OpHarness::new();
        let d = h.int(0);
        let x = h.tensor::<i8>(ScalarType::Char, &[2], &[120, 0]);
        let i = h.i64(&[3], &[0, 0, 1]);
        let s = h.tensor::<i8>(ScalarType::Char, &[3], &[5, 5, -3]);
        let out = h.out(ScalarType::Char, &[2]);
        h.call(scatter_add_out, &[x, d, i, s, out, out]).unwrap();
        assert_eq!(h.read::<i8>(out), vec![-126, -3]);

        let xb = h.bool_tensor(&[2], &[true, false]);
        let sb = h.bool_tensor(&[3], &[true, false, false]);
        let outb = h.out(ScalarType::Bool, &[2]);
        h.call(scatter_add_out, &[xb, d, i, sb, outb, outb]).unwrap();
        assert_eq!(h.read_bool(outb), vec![true, false]);

        // 2048 + 1 + 1 in Half: each step rounds back to 2048.
        let xh = h.tensor(ScalarType::Half, &[1], &[f16::from_f32(2048.)]);
        let ih = h.i64(&[2], &[0, 0]);
        let sh = h.tensor(ScalarType::Half, &[2], &[f16::ONE; 2]);
        let outh = h.out(ScalarType::Half, &[1]);
        h.call(scatter_add_out, &[xh, d, ih, sh, outh, outh]).unwrap();
        assert_eq!(h.read::<f16>(outh), vec![f16::from_f32(2048.)]);
    }

    fn reduce_f32(reduce: &str, include_self: bool, x: &[f32], idx: &[i64], src: &[f32]) -> Vec<f32> {
        let mut h = OpHarness::new();
        let t = h.f32(&[x.len()], x);
        let d = h.int(0);
        let i = h.i64(&[idx.len()], idx);
        let s = h.f32(&[src.len()], src);
        let r = h.push_string(reduce);
        let inc = h.bool(include_self);
        let out = h.out(ScalarType::Float, &[x.len()]);
        h.call(scatter_reduce_two_out, &[t, d, i, s, r, inc, out, out]).unwrap();
        h.read::<f32>(out)
    }

    #[test]
    fn scatter_reduce_each_reduction() {
        let x = [10., 20., 30.];
        let idx = [0, 0, 2];
        let src = [2., 4., 8.];
        assert_eq!(reduce_f32("sum", true, &x, &idx, &src), vec![16., 20., 38.]);
        assert_eq!(reduce_f32("sum", false, &x, &idx, &src), vec![6., 20., 8.]);
        assert_eq!(reduce_f32("prod", true, &x, &idx, &src), vec![80., 20., 240.]);
        assert_eq!(reduce_f32("prod", false, &x, &idx, &src), vec![8., 20., 8.]);
        assert_eq!(reduce_f32("mean", true, &x, &idx, &src), vec![16. / 3., 20., 19.]);
        assert_eq!(reduce_f32("mean", false, &x, &idx, &src), vec![3., 20., 8.]);
        assert_eq!(reduce_f32("amax", true, &x, &idx, &src), vec![10., 20., 30.]);
        assert_eq!(reduce_f32("amax", false, &x, &idx, &src), vec![4., 20., 8.]);
        assert_eq!(reduce_f32("amin", true, &x, &idx, &src), vec![2., 20., 8.]);
        assert_eq!(reduce_f32("amin", false, &x, &idx, &src), vec![2., 20., 8.]);
        let with_nan = reduce_f32("amax", true, &x, &[1, 1], &[f32::NAN, 50.]);
        assert!(with_nan[1].is_nan());
        let nan_self = reduce_f32("amin", true, &[f32::NAN], &[0], &[1.]);
        assert!(nan_self[0].is_nan());
    }

    #[test]
    fn scatter_reduce_integer_mean_floors() {
        let mut h = OpHarness::new();
        let x = h.i64(&[3], &[0, 5, 7]);
        let d = h.int(0);
        let i = h.i64(&[4], &[0, 0, 1, 1]);
        let s = h.i64(&[4], &[-3, -4, 2, 1]);
        let r = h.push_string("mean");
        let (t, f) = (h.bool(true), h.bool(false));
        let out = h.out(ScalarType::Long, &[3]);
        h.call(scatter_reduce_two_out, &[x, d, i, s, r, t, out, out]).unwrap();
        // (0 - 3 - 4) / 3 = -2.33 -> -3; (5 + 2 + 1) / 3 = 2.67 -> 2.
        assert_eq!(h.read::<i64>(out), vec![-3, 2, 7]);
        h.call(scatter_reduce_two_out, &[x, d, i, s, r, f, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![-4, 1, 7]);
    }

    #[test]
    fn scatter_reduce_rejects_unknown_reduce_and_bool_mean() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2], &[1., 2.]);
        let d = h.int(0);
        let i = h.i64(&[1], &[0]);
        let s = h.f32(&[1], &[1.]);
        let (bad, mean) = (h.push_string("max"), h.push_string("mean"));
        let t = h.bool(true);
        let out = h.out(ScalarType::Float, &[2]);
        let e = h.call(scatter_reduce_two_out, &[x, d, i, s, bad, t, out, out]).unwrap_err();
        assert!(e.message.contains("\"max\""), "{e}");
        let xb = h.bool_tensor(&[2], &[true, false]);
        let sb = h.bool_tensor(&[1], &[true]);
        let outb = h.out(ScalarType::Bool, &[2]);
        assert!(h.call(scatter_reduce_two_out, &[xb, d, i, sb, mean, t, outb, outb]).is_err());
    }
}
