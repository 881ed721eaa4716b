//! Load-time folding of pure layout/dequantize ops whose inputs are all constants.
//!
//! ExecuTorch programs often transpose or dequantize a weight on every run
//! (`permute_copy(weight)` before `addmm`, `dequantize_per_channel(w_int8)` before a
//! convolution). When every tensor input of such a call is constant, the result is too: the
//! call runs once at load into memory of its own, and the instruction is dropped. The cost is
//! that memory (reported by [`super::Method::folded_bytes`]).

use alloc::vec;
use alloc::vec::Vec;

use super::method::Instr;
use crate::buffer::AlignedBuf;
use crate::frame::{Frame, FrameBuffer};
use crate::kernel::KernelContext;
use crate::tensor::Storage;
use crate::value::Value;

/// Single-output ops that only read their inputs.
const FOLDABLE: &[&str] = &[
    "aten::permute_copy.out",
    "aten::transpose_copy.int_out",
    "aten::view_copy.out",
    "aten::unsqueeze_copy.out",
    "aten::squeeze_copy.dims_out",
    "aten::squeeze_copy.dim_out",
    "aten::expand_copy.out",
    "aten::slice_copy.Tensor_out",
    "aten::clone.out",
    "aten::alias_copy.out",
    "dim_order_ops::_clone_dim_order.out",
    "dim_order_ops::_to_dim_order_copy.out",
    "quantized_decomposed::dequantize_per_channel.out",
    "quantized_decomposed::dequantize_per_tensor.out",
];

/// Folds what it can in chains without jumps; returns the bytes of memory the folded results
/// occupy. A call that fails here is left in place (it will fail, with context, at execute).
pub(super) fn fold_constants(
    frame: &mut Frame<'_>,
    chains: &mut [Vec<Instr>],
    op_names: &[alloc::string::String],
    io: &[u32],
) -> usize {
    // Values some instruction may write: every call's returned value(s), move targets,
    // delegate arguments, and the method's inputs and outputs.
    // Flags per value index (the loader checked every index against the value table).
    let mut written = vec![false; frame.values.len()];
    let mut mark = |ids: &[u32]| {
        for &v in ids {
            if let Some(w) = written.get_mut(v as usize) {
                *w = true;
            }
        }
    };
    mark(io);
    for ins in chains.iter().flatten() {
        match ins {
            Instr::Kernel { args, .. } | Instr::View { args, .. } => {
                if let Some(&last) = args.last() {
                    mark(&[last]);
                    if let Some(Value::TensorList(items)) = frame.values.get(last as usize) {
                        mark(items);
                    }
                }
            }
            Instr::Delegate { args, .. } => mark(args),
            Instr::Move { to, .. } => mark(&[*to]),
            Instr::JumpFalse { .. } | Instr::Free { .. } => {}
        }
    }
    let mut folded_bytes = 0;
    let mut constant = vec![false; frame.values.len()];
    for chain in chains.iter_mut() {
        if chain.iter().any(|i| matches!(i, Instr::JumpFalse { .. })) {
            continue;
        }
        chain.retain(|ins| {
            let Instr::Kernel { op, kernel, args } = ins else { return true };
            if !FOLDABLE.contains(&op_names[*op as usize].as_str()) {
                return true;
            }
            let Some((&out, inputs)) = args.split_last() else { return true };
            // The out argument appears twice (schema `out`, then the return).
            let inputs: Vec<u32> = inputs.iter().copied().filter(|&v| v != out).collect();
            let out_written_once = args.iter().filter(|&&v| v == out).count() == 2 || args.len() == 1;
            if !out_written_once || !inputs.iter().all(|&v| is_constant(frame, &constant, &written, v)) {
                return true;
            }
            let Value::Tensor(t) = &frame.values[out as usize] else { return true };
            let Some(buf) = AlignedBuf::try_zeroed(t.capacity) else { return true };
            // Compute straight into the new buffer so the arena (which may hold mutable-data
            // initial values) is never touched.
            let saved = t.storage;
            frame.buffers.push(FrameBuffer::Owned(buf));
            let index = (frame.buffers.len() - 1) as u32;
            set_storage(frame, out, Storage::Buffer { index, offset: 0 });
            if frame.call(*kernel, &mut KernelContext::default(), args).is_err() {
                set_storage(frame, out, saved);
                return true;
            }
            folded_bytes += frame.buffers[index as usize].as_slice().len();
            if let Some(c) = constant.get_mut(out as usize) {
                *c = true;
            }
            false
        });
    }
    folded_bytes
}

fn set_storage(frame: &mut Frame<'_>, id: u32, s: Storage) {
    if let Value::Tensor(t) = &mut frame.values[id as usize] {
        t.storage = s;
    }
}

/// A value whose content is fixed for the method's lifetime.
fn is_constant(frame: &Frame<'_>, folded: &[bool], written: &[bool], v: u32) -> bool {
    let flag = |set: &[bool], v: u32| set.get(v as usize).copied().unwrap_or(false);
    if flag(folded, v) {
        return true;
    }
    if flag(written, v) {
        return false;
    }
    let Some(value) = frame.values.get(v as usize) else { return false };
    match value {
        Value::Tensor(t) => match t.storage {
            Storage::Buffer { index, .. } => matches!(frame.buffers[index as usize], FrameBuffer::Const(_)),
            Storage::None => t.capacity == 0,
        },
        Value::IntList(items) => items.iter().all(|&i| !flag(written, i)),
        Value::TensorList(items) => items.iter().all(|&i| is_constant(frame, folded, written, i)),
        Value::OptionalTensorList(items) => items.iter().flatten().all(|&i| is_constant(frame, folded, written, i)),
        _ => true,
    }
}
