//! Shared helpers for portable kernels: dtype-erased element access, broadcasting, dims.

use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::kernel::{normalize_dim, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

/// A tensor's elements with the dtype erased, for kernels that compute in f64/i64.
#[derive(Clone, Copy)]
pub enum Elems<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    I8(&'a [i8]),
    U8(&'a [u8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    Bool(&'a [u8]),
}

macro_rules! each_elems {
    ($e:expr, $s:ident => $body:expr) => {
        match $e {
            Elems::F32($s) => $body,
            Elems::F64($s) => $body,
            Elems::F16($s) => $body,
            Elems::BF16($s) => $body,
            Elems::I8($s) => $body,
            Elems::U8($s) => $body,
            Elems::I16($s) => $body,
            Elems::I32($s) => $body,
            Elems::I64($s) => $body,
            Elems::U16($s) => $body,
            Elems::U32($s) => $body,
            Elems::U64($s) => $body,
            Elems::Bool($s) => $body,
        }
    };
}

impl<'a> Elems<'a> {
    pub fn of(t: &TensorRef<'a>) -> KernelResult<Elems<'a>> {
        Ok(match t.dtype {
            ScalarType::Float => Elems::F32(t.data()?),
            ScalarType::Double => Elems::F64(t.data()?),
            ScalarType::Half => Elems::F16(t.data()?),
            ScalarType::BFloat16 => Elems::BF16(t.data()?),
            ScalarType::Char | ScalarType::QInt8 => Elems::I8(t.data()?),
            ScalarType::Byte | ScalarType::QUInt8 => Elems::U8(t.data()?),
            ScalarType::Short => Elems::I16(t.data()?),
            ScalarType::Int | ScalarType::QInt32 => Elems::I32(t.data()?),
            ScalarType::Long => Elems::I64(t.data()?),
            ScalarType::UInt16 => Elems::U16(t.data()?),
            ScalarType::UInt32 => Elems::U32(t.data()?),
            ScalarType::UInt64 => Elems::U64(t.data()?),
            ScalarType::Bool => Elems::Bool(t.data()?),
            d => return Err(kerr!("dtype {d} is not supported by this kernel")),
        })
    }

    pub fn len(&self) -> usize {
        each_elems!(self, s => s.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn f64(&self, i: usize) -> f64 {
        match self {
            Elems::F32(s) => s[i] as f64,
            Elems::F64(s) => s[i],
            Elems::F16(s) => s[i].to_f64(),
            Elems::BF16(s) => s[i].to_f64(),
            Elems::I8(s) => s[i] as f64,
            Elems::U8(s) => s[i] as f64,
            Elems::I16(s) => s[i] as f64,
            Elems::I32(s) => s[i] as f64,
            Elems::I64(s) => s[i] as f64,
            Elems::U16(s) => s[i] as f64,
            Elems::U32(s) => s[i] as f64,
            Elems::U64(s) => s[i] as f64,
            Elems::Bool(s) => (s[i] != 0) as u8 as f64,
        }
    }

    /// Integer value; floats truncate toward zero (PyTorch's cast).
    #[inline]
    pub fn i64(&self, i: usize) -> i64 {
        match self {
            Elems::F32(s) => s[i] as i64,
            Elems::F64(s) => s[i] as i64,
            Elems::F16(s) => s[i].to_f32() as i64,
            Elems::BF16(s) => s[i].to_f32() as i64,
            Elems::I8(s) => s[i] as i64,
            Elems::U8(s) => s[i] as i64,
            Elems::I16(s) => s[i] as i64,
            Elems::I32(s) => s[i] as i64,
            Elems::I64(s) => s[i],
            Elems::U16(s) => s[i] as i64,
            Elems::U32(s) => s[i] as i64,
            Elems::U64(s) => s[i] as i64,
            Elems::Bool(s) => (s[i] != 0) as i64,
        }
    }

    #[inline]
    pub fn bool(&self, i: usize) -> bool {
        match self {
            Elems::F32(s) => s[i] != 0.0,
            Elems::F64(s) => s[i] != 0.0,
            Elems::F16(s) => s[i].to_f32() != 0.0,
            Elems::BF16(s) => s[i].to_f32() != 0.0,
            Elems::Bool(s) | Elems::U8(s) => s[i] != 0,
            _ => self.i64(i) != 0,
        }
    }
}

/// Writable elements with the dtype erased.
pub enum ElemsMut<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    F16(&'a mut [f16]),
    BF16(&'a mut [bf16]),
    I8(&'a mut [i8]),
    U8(&'a mut [u8]),
    I16(&'a mut [i16]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
    U16(&'a mut [u16]),
    U32(&'a mut [u32]),
    U64(&'a mut [u64]),
    Bool(&'a mut [u8]),
}

impl<'a> ElemsMut<'a> {
    pub fn of<'b>(t: &'b mut TensorMut<'a>) -> KernelResult<ElemsMut<'b>> {
        Ok(match t.dtype {
            ScalarType::Float => ElemsMut::F32(t.data_mut()?),
            ScalarType::Double => ElemsMut::F64(t.data_mut()?),
            ScalarType::Half => ElemsMut::F16(t.data_mut()?),
            ScalarType::BFloat16 => ElemsMut::BF16(t.data_mut()?),
            ScalarType::Char | ScalarType::QInt8 => ElemsMut::I8(t.data_mut()?),
            ScalarType::Byte | ScalarType::QUInt8 => ElemsMut::U8(t.data_mut()?),
            ScalarType::Short => ElemsMut::I16(t.data_mut()?),
            ScalarType::Int | ScalarType::QInt32 => ElemsMut::I32(t.data_mut()?),
            ScalarType::Long => ElemsMut::I64(t.data_mut()?),
            ScalarType::UInt16 => ElemsMut::U16(t.data_mut()?),
            ScalarType::UInt32 => ElemsMut::U32(t.data_mut()?),
            ScalarType::UInt64 => ElemsMut::U64(t.data_mut()?),
            ScalarType::Bool => ElemsMut::Bool(t.data_mut()?),
            d => return Err(kerr!("dtype {d} is not supported by this kernel")),
        })
    }

    /// Stores a float; integer outputs truncate toward zero, bool is `!= 0`.
    #[inline]
    pub fn set_f64(&mut self, i: usize, v: f64) {
        match self {
            ElemsMut::F32(s) => s[i] = v as f32,
            ElemsMut::F64(s) => s[i] = v,
            ElemsMut::F16(s) => s[i] = f16::from_f64(v),
            ElemsMut::BF16(s) => s[i] = bf16::from_f64(v),
            ElemsMut::I8(s) => s[i] = v as i8,
            ElemsMut::U8(s) => s[i] = v as u8,
            ElemsMut::I16(s) => s[i] = v as i16,
            ElemsMut::I32(s) => s[i] = v as i32,
            ElemsMut::I64(s) => s[i] = v as i64,
            ElemsMut::U16(s) => s[i] = v as u16,
            ElemsMut::U32(s) => s[i] = v as u32,
            ElemsMut::U64(s) => s[i] = v as u64,
            ElemsMut::Bool(s) => s[i] = (v != 0.0) as u8,
        }
    }

    /// Stores an integer (wrapping into narrower integer types, as PyTorch does).
    #[inline]
    pub fn set_i64(&mut self, i: usize, v: i64) {
        match self {
            ElemsMut::F32(s) => s[i] = v as f32,
            ElemsMut::F64(s) => s[i] = v as f64,
            ElemsMut::F16(s) => s[i] = f16::from_f64(v as f64),
            ElemsMut::BF16(s) => s[i] = bf16::from_f64(v as f64),
            ElemsMut::I8(s) => s[i] = v as i8,
            ElemsMut::U8(s) => s[i] = v as u8,
            ElemsMut::I16(s) => s[i] = v as i16,
            ElemsMut::I32(s) => s[i] = v as i32,
            ElemsMut::I64(s) => s[i] = v,
            ElemsMut::U16(s) => s[i] = v as u16,
            ElemsMut::U32(s) => s[i] = v as u32,
            ElemsMut::U64(s) => s[i] = v as u64,
            ElemsMut::Bool(s) => s[i] = (v != 0) as u8,
        }
    }

    #[inline]
    pub fn set_bool(&mut self, i: usize, v: bool) {
        self.set_i64(i, v as i64)
    }

    /// Copies element `j` of `src` into element `i`, converting the dtype.
    #[inline]
    pub fn copy_from(&mut self, i: usize, src: &Elems<'_>, j: usize) {
        if self.is_floating() {
            self.set_f64(i, src.f64(j))
        } else if let ElemsMut::Bool(s) = self {
            s[i] = src.bool(j) as u8
        } else {
            self.set_i64(i, src.i64(j))
        }
    }

    pub fn is_floating(&self) -> bool {
        matches!(self, ElemsMut::F32(_) | ElemsMut::F64(_) | ElemsMut::F16(_) | ElemsMut::BF16(_))
    }
}

/// The broadcast result of two shapes (NumPy rules), or an error naming both.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> KernelResult<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(kerr!("shapes {a:?} and {b:?} cannot be broadcast together")),
        };
    }
    Ok(out)
}

/// Strides (in elements) to read a contiguous tensor of `in_sizes` broadcast to `out_sizes`:
/// 0 along broadcast dimensions.
pub fn broadcast_strides(in_sizes: &[usize], out_sizes: &[usize]) -> KernelResult<Vec<usize>> {
    let rank = out_sizes.len();
    if in_sizes.len() > rank {
        return Err(kerr!("shape {in_sizes:?} cannot be broadcast to {out_sizes:?}"));
    }
    let mut strides = vec![0usize; rank];
    let mut acc = 1usize;
    for k in (0..in_sizes.len()).rev() {
        let o = k + rank - in_sizes.len();
        let d = in_sizes[k];
        if d == out_sizes[o] {
            strides[o] = if d == 1 { 0 } else { acc };
        } else if d != 1 {
            return Err(kerr!("shape {in_sizes:?} cannot be broadcast to {out_sizes:?}"));
        }
        acc *= d;
    }
    Ok(strides)
}

/// Calls `f(out_index, [input indices])` for every element of `out_sizes`, in order, with the
/// matching offsets of each input under `strides` (from `broadcast_strides`).
pub fn for_each_broadcast<const N: usize>(
    out_sizes: &[usize],
    strides: [&[usize]; N],
    mut f: impl FnMut(usize, [usize; N]),
) {
    let rank = out_sizes.len();
    let numel: usize = out_sizes.iter().product();
    if numel == 0 {
        return;
    }
    let mut idx = vec![0usize; rank];
    let mut offs = [0usize; N];
    for o in 0..numel {
        f(o, offs);
        // Increment the multi-index, updating offsets incrementally.
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for (n, s) in strides.iter().enumerate() {
                offs[n] += s[d];
            }
            if idx[d] < out_sizes[d] {
                break;
            }
            for (n, s) in strides.iter().enumerate() {
                offs[n] -= s[d] * out_sizes[d];
            }
            idx[d] = 0;
        }
    }
}

/// Normalizes a list of possibly negative dims and rejects duplicates.
pub fn normalize_dims(dims: &[i64], rank: usize) -> KernelResult<Vec<usize>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = normalize_dim(d, rank)?;
        if out.contains(&n) {
            return Err(kerr!("dim {d} repeated in {dims:?}"));
        }
        out.push(n);
    }
    Ok(out)
}

/// Converts i64 sizes from an int list, rejecting negatives.
pub fn to_sizes(v: &[i64]) -> KernelResult<Vec<usize>> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| kerr!("negative size {d} in {v:?}"))).collect()
}

/// Rejects a non-contiguous dim order (kernels here compute on contiguous data).
pub fn require_contiguous(t: &TensorRef<'_>, what: &str) -> KernelResult {
    if t.dim_order.is_contiguous() {
        Ok(())
    } else {
        Err(kerr!("{what}: dim order {:?} is not supported (contiguous only)", t.dim_order))
    }
}

/// Expands a per-spatial-dim int list (kernel size, stride, padding, …) to `n` values: empty →
/// `default`, one value → repeated, `n` values → as given. Every value must be `>= min`.
pub fn spatial(list: &[i64], n: usize, default: i64, what: &str, min: i64) -> KernelResult<Vec<usize>> {
    if list.len() > 1 && list.len() != n {
        return Err(kerr!("{what} {list:?} must have 1 or {n} values"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let x = match list.len() {
            0 => default,
            1 => list[0],
            _ => list[i],
        };
        // A plain loop: this runs in every convolution's argument check, in every runner.
        match usize::try_from(x) {
            Ok(u) if x >= min => out.push(u),
            _ => return Err(kerr!("{what} {list:?} must be >= {min}")),
        }
    }
    Ok(out)
}

/// A pooling window's span: `dilation * (kernel - 1) + 1`, or `None` on overflow.
pub fn pool_span(kernel: usize, dilation: usize) -> Option<usize> {
    dilation.checked_mul(kernel.checked_sub(1)?)?.checked_add(1)
}

/// PyTorch's pooling output size along one dim (`pooling_output_shape`), including the
/// ceil-mode rule that the last window must start inside the input or its left padding.
/// `None` when the padded input is shorter than the window (or the sizes overflow); the caller
/// rejects a zero result. Needs `kernel, stride, dilation >= 1`.
pub fn pool_output_size(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    ceil: bool,
) -> Option<usize> {
    let span = pool_span(kernel, dilation)?;
    let padded = input.checked_add(pad.checked_mul(2)?)?;
    let room = padded.checked_sub(span)?;
    let mut out = room.checked_add(if ceil { stride - 1 } else { 0 })? / stride + 1;
    if ceil && (out - 1) * stride >= input + pad {
        out -= 1;
    }
    Some(out)
}
