//! A value table plus the memory its tensors live in; the executor's state for one method and
//! the place where one kernel call happens.

use alloc::format;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::buffer::AlignedBuf;
use crate::kernel::{KernelArgs, KernelContext, KernelError, KernelFn, Pending, RawBuffer};
use crate::tensor::Storage;
use crate::value::Value;

/// One block of tensor memory.
#[derive(Debug)]
pub enum FrameBuffer<'p> {
    /// Read-only bytes borrowed from the program (the constant segment).
    Const(&'p [u8]),
    /// Writable memory the frame owns (a planned arena, an input or output buffer).
    Owned(AlignedBuf),
    /// A planned arena the caller placed (firmware: a linker section in a chosen memory region).
    Borrowed(&'p mut [u8]),
}

impl FrameBuffer<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            FrameBuffer::Const(b) => b,
            FrameBuffer::Owned(b) => b.as_slice(),
            FrameBuffer::Borrowed(b) => b,
        }
    }

    /// The bytes, when writable.
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        match self {
            FrameBuffer::Const(_) => None,
            FrameBuffer::Owned(b) => Some(b.as_mut_slice()),
            FrameBuffer::Borrowed(b) => Some(b),
        }
    }
}

#[derive(Debug, Default)]
pub struct Frame<'p> {
    pub values: Vec<Value>,
    pub buffers: Vec<FrameBuffer<'p>>,
}

impl<'p> Frame<'p> {
    pub fn new() -> Self {
        Frame { values: Vec::new(), buffers: Vec::new() }
    }

    /// Raw views of every buffer, valid while `self.buffers` is not touched.
    pub(crate) fn raw_buffers(&mut self) -> Vec<RawBuffer> {
        self.buffers
            .iter_mut()
            .map(|b| match b {
                FrameBuffer::Const(s) => RawBuffer { ptr: s.as_ptr() as *mut u8, len: s.len(), writable: false },
                FrameBuffer::Owned(o) => {
                    let s = o.as_mut_slice();
                    RawBuffer { ptr: s.as_mut_ptr(), len: s.len(), writable: true }
                }
                FrameBuffer::Borrowed(s) => RawBuffer { ptr: s.as_mut_ptr(), len: s.len(), writable: true },
            })
            .collect()
    }

    /// Runs one kernel over the values `ids` and applies the scalar/shape results it set.
    pub fn call(&mut self, kernel: KernelFn, ctx: &mut KernelContext, ids: &[u32]) -> Result<(), KernelError> {
        let raws = self.raw_buffers();
        Self::call_with(&mut self.values, &raws, kernel, ctx, ids)
    }

    /// As `call`, with raw buffers made once by the caller for many calls.
    pub(crate) fn call_with(
        values: &mut [Value],
        raws: &[RawBuffer],
        kernel: KernelFn,
        ctx: &mut KernelContext,
        ids: &[u32],
    ) -> Result<(), KernelError> {
        let pending = RefCell::new(Vec::new());
        {
            // SAFETY: `raws` come from `raw_buffers` of the frame that owns `values`; the caller
            // holds that frame's buffers borrowed (they are neither moved nor dropped) for this
            // call; const buffers are marked read-only.
            let args = unsafe { KernelArgs::new(values, ids, raws, &pending) };
            kernel(ctx, &args)?;
        }
        for (id, p) in pending.into_inner() {
            let v = values.get_mut(id as usize).ok_or_else(|| KernelError::new(format!("value {id} out of range")))?;
            match (v, p) {
                (Value::Tensor(t), Pending::Shape(s)) => t.shape = s,
                (v, Pending::Int(i)) => *v = Value::Int(i),
                (v, Pending::Double(d)) => *v = Value::Double(d),
                (v, Pending::Bool(b)) => *v = Value::Bool(b),
                (v, Pending::Shape(_)) => {
                    return Err(KernelError::new(format!("value {id} is {} and cannot be resized", v.kind())))
                }
            }
        }
        Ok(())
    }

    /// The bytes of a tensor value (current shape).
    pub fn tensor_bytes(&self, id: u32) -> Option<&[u8]> {
        let t = self.values.get(id as usize)?.as_tensor()?;
        match t.storage {
            Storage::None => (t.nbytes() == 0).then_some(&[][..]),
            Storage::Buffer { index, offset } => {
                self.buffers.get(index as usize)?.as_slice().get(offset..offset.checked_add(t.nbytes())?)
            }
        }
    }

    /// Mutable bytes of a tensor value held in writable memory (up to its capacity).
    pub fn tensor_bytes_mut(&mut self, id: u32) -> Option<&mut [u8]> {
        let t = self.values.get(id as usize)?.as_tensor()?;
        let cap = t.capacity;
        match t.storage {
            Storage::None => None,
            Storage::Buffer { index, offset } => {
                self.buffers.get_mut(index as usize)?.as_mut_slice()?.get_mut(offset..offset.checked_add(cap)?)
            }
        }
    }
}
