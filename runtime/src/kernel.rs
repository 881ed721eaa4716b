//! The one kernel signature: a context plus the argument values of one KernelCall.
//!
//! Arguments follow ExecuTorch's KernelCall convention: every schema argument in schema order
//! (keyword-only `out` included), then the returned tensor(s) again. Kernels read inputs with
//! [`KernelArgs::tensor`], write outputs through [`KernelArgs::out`] and resize them with
//! [`TensorMut::resize`]. Borrows are checked: an output can never alias another argument.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::marker::PhantomData;

use crate::tensor::{DimOrder, Dynamism, Shape, Storage};
use crate::value::{Scalar, Value};
use crate::ScalarType;

/// A kernel failure; the executor adds the operator name and instruction index.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelError {
    pub message: String,
}

impl KernelError {
    pub fn new(message: impl Into<String>) -> KernelError {
        KernelError { message: message.into() }
    }
}

impl core::fmt::Display for KernelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `kerr!("fmt", args..)` builds a KernelError.
#[macro_export]
macro_rules! kerr {
    ($($t:tt)*) => { $crate::kernel::KernelError::new(alloc::format!($($t)*)) };
}

pub type KernelResult<T = ()> = Result<T, KernelError>;

/// Declares a module's kernels: `KERNELS` (the table) and `KERNEL_PATHS` (op → the Rust path of
/// its function), so a selective build can reference exactly the kernels a program needs and
/// let the linker drop the rest.
///
/// ```ignore
/// rbuild_runtime::kernel_table! { "aten::add.out" => add_out, "aten::mm.out" => linalg::mm_out }
/// ```
#[macro_export]
macro_rules! kernel_table {
    ($($op:literal => $($seg:ident)::+),* $(,)?) => {
        /// This module's kernels.
        pub const KERNELS: &[$crate::KernelEntry] = &[$($crate::KernelEntry { op: $op, kernel: $($seg)::+ }),*];
        /// (operator, path of its kernel function), for generated registration tables.
        pub const KERNEL_PATHS: &[(&str, &str)] = &[$(($op, concat!(module_path!() $(, "::", stringify!($seg))+))),*];
    };
}

/// Per-execution settings a kernel may use.
#[derive(Clone, Debug)]
pub struct KernelContext {
    /// Worker threads a kernel may use (1 = run on the caller's thread only).
    pub threads: usize,
}

impl Default for KernelContext {
    fn default() -> Self {
        KernelContext { threads: 1 }
    }
}

pub type KernelFn = fn(&mut KernelContext, &KernelArgs<'_>) -> KernelResult;

/// A registered kernel: `namespace::name.overload` (e.g. `aten::add.out`) and its function.
#[derive(Clone, Copy)]
pub struct KernelEntry {
    pub op: &'static str,
    pub kernel: KernelFn,
}

impl core::fmt::Debug for KernelEntry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.op)
    }
}

/// Operator name → kernel. A selective build is just a smaller table.
#[derive(Clone, Default, Debug)]
pub struct KernelRegistry {
    entries: Vec<KernelEntry>,
}

impl KernelRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Later registrations of the same op replace earlier ones (optimized over portable).
    pub fn register(&mut self, entries: &[KernelEntry]) {
        for e in entries {
            match self.entries.iter_mut().find(|x| x.op == e.op) {
                Some(x) => *x = *e,
                None => self.entries.push(*e),
            }
        }
    }

    pub fn lookup(&self, op: &str) -> Option<KernelFn> {
        self.entries.iter().find(|e| e.op == op).map(|e| e.kernel)
    }

    pub fn ops(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|e| e.op)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The registry key of an Operator table entry: `name.overload`, or `name` when the overload
/// is empty.
pub fn op_key(name: &str, overload: &str) -> String {
    if overload.is_empty() {
        String::from(name)
    } else {
        format!("{name}.{overload}")
    }
}

/// Element types a tensor's bytes can be viewed as, with the dtypes each may view.
pub trait Element: bytemuck::Pod {
    fn accepts(dtype: ScalarType) -> bool;
}

macro_rules! element {
    ($t:ty => $($d:ident)|+) => {
        impl Element for $t {
            fn accepts(dtype: ScalarType) -> bool {
                matches!(dtype, $(ScalarType::$d)|+)
            }
        }
    };
}
element!(f32 => Float);
element!(f64 => Double);
element!(half::f16 => Half);
element!(half::bf16 => BFloat16);
element!(i8 => Char | QInt8);
element!(u8 => Byte | Bool | QUInt8 | QUInt4x2 | QUInt2x4 | Bits8);
element!(i16 => Short);
element!(u16 => UInt16 | Bits16);
element!(i32 => Int | QInt32);
element!(u32 => UInt32);
element!(i64 => Long);
element!(u64 => UInt64);
// Complex tensors are viewed as interleaved `[re, im]` pairs (PyTorch's complex64/complex128
// layout), one pair per element; kernels do their own complex arithmetic.
element!([f32; 2] => ComplexFloat);
element!([f64; 2] => ComplexDouble);

fn cast<T: Element>(dtype: ScalarType, bytes: &[u8]) -> KernelResult<&[T]> {
    if !T::accepts(dtype) {
        return Err(kerr!("tensor of dtype {dtype} read as {}", core::any::type_name::<T>()));
    }
    if bytes.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(bytes)
        .map_err(|e| kerr!("tensor data of dtype {dtype} is not usable ({e:?}): misaligned storage"))
}

fn cast_mut<T: Element>(dtype: ScalarType, bytes: &mut [u8]) -> KernelResult<&mut [T]> {
    if !T::accepts(dtype) {
        return Err(kerr!("tensor of dtype {dtype} written as {}", core::any::type_name::<T>()));
    }
    if bytes.is_empty() {
        return Ok(&mut []);
    }
    bytemuck::try_cast_slice_mut(bytes)
        .map_err(|e| kerr!("tensor data of dtype {dtype} is not usable ({e:?}): misaligned storage"))
}

/// A read-only tensor argument.
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    pub dtype: ScalarType,
    pub shape: Shape,
    pub dim_order: DimOrder,
    bytes: &'a [u8],
}

impl<'a> TensorRef<'a> {
    pub fn sizes(&self) -> &[usize] {
        self.shape.as_slice()
    }
    pub fn dim(&self) -> usize {
        self.shape.rank()
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }
    /// Size of dimension `d`, which may be negative (counted from the end).
    pub fn size(&self, d: i64) -> KernelResult<usize> {
        Ok(self.shape[normalize_dim(d, self.dim())?])
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// The elements, checked against the dtype.
    pub fn data<T: Element>(&self) -> KernelResult<&'a [T]> {
        cast::<T>(self.dtype, self.bytes)
    }
}

/// A writable tensor argument (an `out` or a mutated `!` argument).
pub struct TensorMut<'a> {
    pub dtype: ScalarType,
    pub dim_order: DimOrder,
    shape: Shape,
    dynamism: Dynamism,
    value: u32,
    bytes: &'a mut [u8],
    pending: &'a RefCell<Vec<(u32, Pending)>>,
}

impl<'a> TensorMut<'a> {
    pub fn shape(&self) -> Shape {
        self.shape
    }
    pub fn sizes(&self) -> &[usize] {
        self.shape.as_slice()
    }
    pub fn dim(&self) -> usize {
        self.shape.rank()
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// Sets the output's sizes. A static tensor keeps its planned sizes; a DYNAMIC_BOUND one may
    /// shrink within its planned capacity.
    pub fn resize(&mut self, sizes: &[usize]) -> KernelResult {
        if sizes == self.shape.as_slice() {
            return Ok(());
        }
        let new = Shape::new(sizes).ok_or_else(|| kerr!("rank {} exceeds 16", sizes.len()))?;
        match self.dynamism {
            Dynamism::Static => Err(kerr!(
                "output has static shape {:?} but the result has shape {:?}",
                self.shape.as_slice(),
                sizes
            )),
            Dynamism::DynamicBound => {
                let need = new.checked_numel().and_then(|n| n.checked_mul(self.dtype.size()));
                match need {
                    Some(n) if n <= self.bytes.len() && new.rank() == self.shape.rank() => {
                        self.shape = new;
                        self.pending.borrow_mut().push((self.value, Pending::Shape(new)));
                        Ok(())
                    }
                    _ => Err(kerr!(
                        "output of capacity {} bytes (bound {:?}) cannot hold shape {:?}",
                        self.bytes.len(),
                        self.shape.as_slice(),
                        sizes
                    )),
                }
            }
        }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.numel() * self.dtype.size();
        &mut self.bytes[..n]
    }

    /// The elements (numel of the current shape), checked against the dtype.
    pub fn data_mut<T: Element>(&mut self) -> KernelResult<&mut [T]> {
        let dtype = self.dtype;
        cast_mut::<T>(dtype, self.bytes_mut())
    }

    /// Read access to what the tensor holds now (for in-place updates).
    pub fn data<T: Element>(&self) -> KernelResult<&[T]> {
        let n = self.numel() * self.dtype.size();
        cast::<T>(self.dtype, &self.bytes[..n])
    }
}

/// A value write that the frame applies after the kernel returns.
#[derive(Clone, Copy, Debug)]
pub enum Pending {
    Shape(Shape),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// A frame buffer as seen during one execution: base pointer, length, writability.
#[derive(Clone, Copy, Debug)]
pub struct RawBuffer {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) writable: bool,
}

#[derive(Clone, Copy)]
struct Borrow {
    buffer: u32,
    start: usize,
    end: usize,
    exclusive: bool,
    value: u32,
}

/// The argument values of one kernel call.
pub struct KernelArgs<'a> {
    values: &'a [Value],
    ids: &'a [u32],
    buffers: &'a [RawBuffer],
    borrows: RefCell<Vec<Borrow>>,
    pending: &'a RefCell<Vec<(u32, Pending)>>,
    _mem: PhantomData<&'a mut [u8]>,
}

/// Normalizes a possibly negative dim against `rank`.
pub fn normalize_dim(d: i64, rank: usize) -> KernelResult<usize> {
    let r = rank as i64;
    let n = if d < 0 { d + r } else { d };
    // A rank-0 tensor accepts dim 0 / -1, as PyTorch does.
    if rank == 0 && (d == 0 || d == -1) {
        return Ok(0);
    }
    if n < 0 || n >= r {
        return Err(kerr!("dim {d} out of range for a tensor of rank {rank}"));
    }
    Ok(n as usize)
}

impl<'a> KernelArgs<'a> {
    /// # Safety
    /// Every `RawBuffer` must point to `len` bytes that stay valid, and are accessed by nothing
    /// else, for `'a`; non-writable buffers must not be written through any path.
    pub(crate) unsafe fn new(
        values: &'a [Value],
        ids: &'a [u32],
        buffers: &'a [RawBuffer],
        pending: &'a RefCell<Vec<(u32, Pending)>>,
    ) -> Self {
        KernelArgs { values, ids, buffers, borrows: RefCell::new(Vec::new()), pending, _mem: PhantomData }
    }

    /// Number of arguments (schema arguments plus the repeated return value).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The value table index of argument `i`.
    pub fn id(&self, i: usize) -> KernelResult<u32> {
        self.ids.get(i).copied().ok_or_else(|| kerr!("argument {i} missing: the call has {} arguments", self.ids.len()))
    }

    fn value_at(&self, id: u32) -> KernelResult<&'a Value> {
        self.values.get(id as usize).ok_or_else(|| kerr!("value index {id} out of range"))
    }

    /// The raw value of argument `i`.
    pub fn value(&self, i: usize) -> KernelResult<&'a Value> {
        self.value_at(self.id(i)?)
    }

    pub fn is_none(&self, i: usize) -> KernelResult<bool> {
        Ok(matches!(self.value(i)?, Value::None))
    }

    /// Reads an optional argument (`T?`): None for a None value, else `read`.
    fn optional<T>(&self, i: usize, read: impl FnOnce(&Self, usize) -> KernelResult<T>) -> KernelResult<Option<T>> {
        if self.is_none(i)? { Ok(None) } else { read(self, i).map(Some) }
    }

    pub fn int(&self, i: usize) -> KernelResult<i64> {
        match self.value(i)? {
            Value::Int(v) => Ok(*v),
            Value::Bool(b) => Ok(*b as i64),
            v => Err(kerr!("argument {i}: expected Int, found {}", v.kind())),
        }
    }

    pub fn opt_int(&self, i: usize) -> KernelResult<Option<i64>> {
        self.optional(i, Self::int)
    }

    pub fn double(&self, i: usize) -> KernelResult<f64> {
        match self.value(i)? {
            Value::Double(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            v => Err(kerr!("argument {i}: expected Double, found {}", v.kind())),
        }
    }

    pub fn opt_double(&self, i: usize) -> KernelResult<Option<f64>> {
        self.optional(i, Self::double)
    }

    pub fn bool(&self, i: usize) -> KernelResult<bool> {
        match self.value(i)? {
            Value::Bool(v) => Ok(*v),
            v => Err(kerr!("argument {i}: expected Bool, found {}", v.kind())),
        }
    }

    pub fn opt_bool(&self, i: usize) -> KernelResult<Option<bool>> {
        self.optional(i, Self::bool)
    }

    pub fn string(&self, i: usize) -> KernelResult<&'a str> {
        match self.value(i)? {
            Value::String(s) => Ok(s),
            v => Err(kerr!("argument {i}: expected String, found {}", v.kind())),
        }
    }

    /// A `Scalar` argument (Int, Double or Bool).
    pub fn scalar(&self, i: usize) -> KernelResult<Scalar> {
        match self.value(i)? {
            Value::Int(v) => Ok(Scalar::Int(*v)),
            Value::Double(v) => Ok(Scalar::Double(*v)),
            Value::Bool(v) => Ok(Scalar::Bool(*v)),
            v => Err(kerr!("argument {i}: expected Scalar, found {}", v.kind())),
        }
    }

    pub fn opt_scalar(&self, i: usize) -> KernelResult<Option<Scalar>> {
        self.optional(i, Self::scalar)
    }

    /// A `ScalarType` argument (stored as an Int code).
    pub fn scalar_type(&self, i: usize) -> KernelResult<ScalarType> {
        let code = self.int(i)?;
        ScalarType::from_code(code).ok_or_else(|| kerr!("argument {i}: unknown ScalarType code {code}"))
    }

    pub fn opt_scalar_type(&self, i: usize) -> KernelResult<Option<ScalarType>> {
        self.optional(i, Self::scalar_type)
    }

    /// An `int[]` / `SymInt[]` argument, resolved to values.
    pub fn int_list(&self, i: usize) -> KernelResult<Vec<i64>> {
        match self.value(i)? {
            Value::IntList(items) => items
                .iter()
                .map(|&id| match self.value_at(id)? {
                    Value::Int(v) => Ok(*v),
                    v => Err(kerr!("argument {i}: int list item {id} is {}, not Int", v.kind())),
                })
                .collect(),
            v => Err(kerr!("argument {i}: expected IntList, found {}", v.kind())),
        }
    }

    pub fn opt_int_list(&self, i: usize) -> KernelResult<Option<Vec<i64>>> {
        self.optional(i, Self::int_list)
    }

    pub fn opt_double_list(&self, i: usize) -> KernelResult<Option<&'a [f64]>> {
        self.optional(i, Self::double_list)
    }

    pub fn double_list(&self, i: usize) -> KernelResult<&'a [f64]> {
        match self.value(i)? {
            Value::DoubleList(v) => Ok(v),
            v => Err(kerr!("argument {i}: expected DoubleList, found {}", v.kind())),
        }
    }

    pub fn bool_list(&self, i: usize) -> KernelResult<&'a [bool]> {
        match self.value(i)? {
            Value::BoolList(v) => Ok(v),
            v => Err(kerr!("argument {i}: expected BoolList, found {}", v.kind())),
        }
    }

    fn tensor_impl(&self, id: u32, what: usize) -> KernelResult<&'a crate::tensor::TensorImpl> {
        match self.value_at(id)? {
            Value::Tensor(t) => Ok(t),
            v => Err(kerr!("argument {what}: expected Tensor, found {}", v.kind())),
        }
    }

    /// Records a borrow of `[start, end)` in `buffer`, rejecting any overlap of an exclusive
    /// borrow with another borrow of a different value.
    fn borrow(&self, b: Borrow) -> KernelResult {
        let mut borrows = self.borrows.borrow_mut();
        for o in borrows.iter() {
            let overlap = o.buffer == b.buffer && o.start < b.end && b.start < o.end;
            if overlap && (o.exclusive || b.exclusive) {
                if o.value == b.value && !o.exclusive && !b.exclusive {
                    continue;
                }
                return Err(kerr!(
                    "value {} and value {} share memory but one of them is written by this kernel",
                    o.value,
                    b.value
                ));
            }
        }
        borrows.push(b);
        Ok(())
    }

    fn tensor_by_id(&self, id: u32, what: usize) -> KernelResult<TensorRef<'a>> {
        let t = self.tensor_impl(id, what)?;
        let n = t.nbytes();
        let bytes: &'a [u8] = match t.storage {
            Storage::None if n == 0 => &[],
            Storage::None => return Err(kerr!("argument {what}: tensor value {id} has no data (input not set?)")),
            Storage::Buffer { index, offset } => {
                let buf = self.buffers.get(index as usize).ok_or_else(|| kerr!("buffer {index} missing"))?;
                let end = offset.checked_add(n).filter(|&e| e <= buf.len).ok_or_else(|| {
                    kerr!("argument {what}: tensor value {id} ({n} bytes at {offset}) exceeds its buffer of {} bytes", buf.len)
                })?;
                if n > 0 {
                    self.borrow(Borrow { buffer: index, start: offset, end, exclusive: false, value: id })?;
                }
                // SAFETY: [offset, end) lies inside the buffer (checked above), the buffer is valid
                // for 'a (KernelArgs::new contract), and no exclusive borrow overlaps it (checked
                // by `borrow`), so no &mut to these bytes exists for 'a.
                unsafe { core::slice::from_raw_parts(buf.ptr.add(offset), n) }
            }
        };
        Ok(TensorRef { dtype: t.dtype, shape: t.shape, dim_order: t.dim_order, bytes })
    }

    /// A `Tensor` argument.
    pub fn tensor(&self, i: usize) -> KernelResult<TensorRef<'a>> {
        self.tensor_by_id(self.id(i)?, i)
    }

    /// A `Tensor?` argument.
    pub fn opt_tensor(&self, i: usize) -> KernelResult<Option<TensorRef<'a>>> {
        self.optional(i, Self::tensor)
    }

    /// A `Tensor[]` argument.
    pub fn tensor_list(&self, i: usize) -> KernelResult<Vec<TensorRef<'a>>> {
        match self.value(i)? {
            Value::TensorList(items) => items.iter().map(|&id| self.tensor_by_id(id, i)).collect(),
            v => Err(kerr!("argument {i}: expected TensorList, found {}", v.kind())),
        }
    }

    /// A `Tensor?[]` argument.
    pub fn opt_tensor_list(&self, i: usize) -> KernelResult<Vec<Option<TensorRef<'a>>>> {
        match self.value(i)? {
            Value::OptionalTensorList(items) => items
                .iter()
                .map(|id| id.map(|id| self.tensor_by_id(id, i)).transpose())
                .collect(),
            Value::TensorList(items) => items.iter().map(|&id| self.tensor_by_id(id, i).map(Some)).collect(),
            v => Err(kerr!("argument {i}: expected OptionalTensorList, found {}", v.kind())),
        }
    }

    fn out_by_id(&self, id: u32, what: usize) -> KernelResult<TensorMut<'a>> {
        let t = self.tensor_impl(id, what)?;
        let (index, offset) = match t.storage {
            Storage::Buffer { index, offset } => (index, offset),
            Storage::None => {
                return if t.capacity == 0 {
                    Ok(TensorMut {
                        dtype: t.dtype,
                        dim_order: t.dim_order,
                        shape: t.shape,
                        dynamism: t.dynamism,
                        value: id,
                        bytes: &mut [],
                        pending: self.pending,
                    })
                } else {
                    Err(kerr!("argument {what}: output tensor value {id} has no memory"))
                };
            }
        };
        let buf = self.buffers.get(index as usize).ok_or_else(|| kerr!("buffer {index} missing"))?;
        if !buf.writable {
            return Err(kerr!("argument {what}: tensor value {id} is a constant and cannot be written"));
        }
        let end = offset
            .checked_add(t.capacity)
            .filter(|&e| e <= buf.len)
            .ok_or_else(|| kerr!("argument {what}: output value {id} exceeds its buffer"))?;
        if self.borrows.borrow().iter().any(|b| b.value == id && b.exclusive) {
            return Err(kerr!("argument {what}: output value {id} requested twice"));
        }
        if t.capacity > 0 {
            self.borrow(Borrow { buffer: index, start: offset, end, exclusive: true, value: id })?;
        }
        // SAFETY: in bounds (checked), the buffer is writable and valid for 'a, and `borrow`
        // guarantees no other live view overlaps [offset, end).
        let bytes = unsafe { core::slice::from_raw_parts_mut(buf.ptr.add(offset), t.capacity) };
        Ok(TensorMut {
            dtype: t.dtype,
            dim_order: t.dim_order,
            shape: t.shape,
            dynamism: t.dynamism,
            value: id,
            bytes,
            pending: self.pending,
        })
    }

    /// A writable tensor argument (`out`, or a `Tensor(a!)` input that the op mutates).
    pub fn out(&self, i: usize) -> KernelResult<TensorMut<'a>> {
        self.out_by_id(self.id(i)?, i)
    }

    /// Writable elements of a `Tensor[]` output argument (ops with several returns).
    pub fn out_list(&self, i: usize) -> KernelResult<Vec<TensorMut<'a>>> {
        match self.value(i)? {
            Value::TensorList(items) => items.iter().map(|&id| self.out_by_id(id, i)).collect(),
            Value::Tensor(_) => Ok(alloc::vec![self.out(i)?]),
            v => Err(kerr!("argument {i}: expected TensorList, found {}", v.kind())),
        }
    }

    /// Sets a scalar result (prim ops return Int/Double/Bool values).
    pub fn set_int(&self, i: usize, v: i64) -> KernelResult {
        self.pending.borrow_mut().push((self.id(i)?, Pending::Int(v)));
        Ok(())
    }
    pub fn set_double(&self, i: usize, v: f64) -> KernelResult {
        self.pending.borrow_mut().push((self.id(i)?, Pending::Double(v)));
        Ok(())
    }
    pub fn set_bool(&self, i: usize, v: bool) -> KernelResult {
        self.pending.borrow_mut().push((self.id(i)?, Pending::Bool(v)));
        Ok(())
    }
}
