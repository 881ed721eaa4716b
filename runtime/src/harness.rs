//! Build values by hand and call one kernel: for kernel tests and eager evaluation.

use alloc::vec::Vec;

use crate::buffer::AlignedBuf;
use crate::frame::{Frame, FrameBuffer};
use crate::kernel::{Element, KernelContext, KernelError, KernelFn};
use crate::tensor::{DimOrder, Dynamism, Shape, Storage, TensorImpl};
use crate::value::Value;
use crate::ScalarType;

#[derive(Debug, Default)]
pub struct OpHarness {
    pub frame: Frame<'static>,
    pub ctx: KernelContext,
}

impl OpHarness {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, v: Value) -> u32 {
        self.frame.values.push(v);
        (self.frame.values.len() - 1) as u32
    }

    fn push_tensor(&mut self, dtype: ScalarType, sizes: &[usize], bytes: &[u8], dynamism: Dynamism) -> u32 {
        let shape = Shape::new(sizes).expect("rank <= 16");
        let capacity = shape.numel() * dtype.size();
        assert!(bytes.len() == capacity || bytes.is_empty(), "data length does not match sizes");
        let mut buf = AlignedBuf::zeroed(capacity);
        if !bytes.is_empty() {
            buf.as_mut_slice().copy_from_slice(bytes);
        }
        self.frame.buffers.push(FrameBuffer::Owned(buf));
        let index = (self.frame.buffers.len() - 1) as u32;
        self.push(Value::Tensor(TensorImpl {
            dtype,
            shape,
            dim_order: DimOrder::contiguous(sizes.len()),
            dynamism,
            capacity,
            storage: Storage::Buffer { index, offset: 0 },
        }))
    }

    /// An input tensor with the given elements; `T` must match `dtype` (u8 for Bool).
    pub fn tensor<T: Element>(&mut self, dtype: ScalarType, sizes: &[usize], data: &[T]) -> u32 {
        assert!(T::accepts(dtype), "element type does not match {dtype}");
        self.push_tensor(dtype, sizes, bytemuck::cast_slice(data), Dynamism::Static)
    }

    pub fn f32(&mut self, sizes: &[usize], data: &[f32]) -> u32 {
        self.tensor(ScalarType::Float, sizes, data)
    }

    pub fn i64(&mut self, sizes: &[usize], data: &[i64]) -> u32 {
        self.tensor(ScalarType::Long, sizes, data)
    }

    pub fn bool_tensor(&mut self, sizes: &[usize], data: &[bool]) -> u32 {
        let bytes: Vec<u8> = data.iter().map(|&b| b as u8).collect();
        self.tensor(ScalarType::Bool, sizes, &bytes)
    }

    /// A zeroed output with static sizes (as exported programs have).
    pub fn out(&mut self, dtype: ScalarType, sizes: &[usize]) -> u32 {
        self.push_tensor(dtype, sizes, &[], Dynamism::Static)
    }

    /// A zeroed DYNAMIC_BOUND output whose `bound` sizes give its capacity.
    pub fn out_dynamic(&mut self, dtype: ScalarType, bound: &[usize]) -> u32 {
        self.push_tensor(dtype, bound, &[], Dynamism::DynamicBound)
    }

    pub fn none(&mut self) -> u32 {
        self.push(Value::None)
    }
    pub fn int(&mut self, v: i64) -> u32 {
        self.push(Value::Int(v))
    }
    pub fn double(&mut self, v: f64) -> u32 {
        self.push(Value::Double(v))
    }
    pub fn bool(&mut self, v: bool) -> u32 {
        self.push(Value::Bool(v))
    }
    pub fn scalar_type(&mut self, t: ScalarType) -> u32 {
        self.push(Value::Int(t.code() as i64))
    }
    pub fn int_list(&mut self, items: &[i64]) -> u32 {
        let ids = items.iter().map(|&v| self.int(v)).collect();
        self.push(Value::IntList(ids))
    }
    pub fn double_list(&mut self, items: &[f64]) -> u32 {
        self.push(Value::DoubleList(items.to_vec()))
    }
    pub fn bool_list(&mut self, items: &[bool]) -> u32 {
        self.push(Value::BoolList(items.to_vec()))
    }
    pub fn tensor_list(&mut self, ids: &[u32]) -> u32 {
        self.push(Value::TensorList(ids.to_vec()))
    }
    pub fn opt_tensor_list(&mut self, ids: &[Option<u32>]) -> u32 {
        self.push(Value::OptionalTensorList(ids.to_vec()))
    }

    /// Calls `kernel` with the values `ids` as its arguments.
    pub fn call(&mut self, kernel: KernelFn, ids: &[u32]) -> Result<(), KernelError> {
        self.frame.call(kernel, &mut self.ctx, ids)
    }

    pub fn sizes(&self, id: u32) -> Vec<usize> {
        self.frame.values[id as usize].as_tensor().expect("a tensor").shape.as_slice().to_vec()
    }

    /// The elements of a tensor value (current shape).
    pub fn read<T: Element>(&self, id: u32) -> Vec<T> {
        let t = self.frame.values[id as usize].as_tensor().expect("a tensor");
        assert!(T::accepts(t.dtype), "element type does not match {}", t.dtype);
        bytemuck::pod_collect_to_vec(self.frame.tensor_bytes(id).expect("tensor bytes"))
    }

    pub fn read_bool(&self, id: u32) -> Vec<bool> {
        self.read::<u8>(id).into_iter().map(|b| b != 0).collect()
    }

    pub fn value(&self, id: u32) -> &Value {
        &self.frame.values[id as usize]
    }
}
