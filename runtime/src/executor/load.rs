//! ExecutionPlan → Method: values, planned arenas, constants, kernels, delegates.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::method::{Instr, Method};
use super::{detail, LoadError};
use crate::backend::{BackendInitContext, BackendRegistry, CompileSpec};
use crate::buffer::AlignedBuf;
use crate::format::schema::{self, ExecutionPlan, InstructionArguments, KernelTypes};
use crate::format::PteFile;
use crate::frame::{Frame, FrameBuffer};
use crate::tensor::{DimOrder, Dynamism, Shape, Storage, TensorImpl};
use crate::value::Value;
use crate::{KernelRegistry, ScalarType};

/// The op the executor implements itself: it re-points a tensor at another's memory.
pub(super) const ET_VIEW: &str = "executorch_prim::et_view.default";

struct Loader<'a, 'p> {
    file: &'a PteFile<'p>,
    method: String,
    frame: Frame<'p>,
    /// Frame buffer index of each planned arena (memory_id - 1).
    arenas: Vec<u32>,
    /// Constant segment: frame buffer index and per-tensor offsets.
    constants: Option<(u32, &'a [u64])>,
    /// Deprecated inline constant buffers: frame buffer index per Program.constant_buffer entry.
    inline_constants: Vec<Option<u32>>,
}

impl<'p> Loader<'_, 'p> {
    fn invalid(&self, what: &str) -> LoadError {
        LoadError::Invalid { method: self.method.clone(), what: what.into() }
    }

    /// `invalid` with a message rendered by [`detail`]: `{}` unsigned, `{i}` signed arguments.
    #[inline(never)]
    fn bad(&self, template: &str, args: &[u64]) -> LoadError {
        LoadError::Invalid { method: self.method.clone(), what: detail(template, args) }
    }

    fn unsupported(&self, template: &str, args: &[u64]) -> LoadError {
        LoadError::NotSupported { method: self.method.clone(), what: detail(template, args) }
    }

    fn push_buffer(&mut self, b: FrameBuffer<'p>) -> u32 {
        self.frame.buffers.push(b);
        (self.frame.buffers.len() - 1) as u32
    }

    fn tensor(&mut self, i: usize, t: &schema::Tensor<'p>) -> Result<TensorImpl, LoadError> {
        let iv = i as u64;
        let dtype = ScalarType::from_code(t.scalar_type as i64)
            .ok_or_else(|| self.bad("value {}: unknown scalar type {i}", &[iv, t.scalar_type as i64 as u64]))?;
        let sizes = t.sizes.as_deref().ok_or_else(|| self.bad("value {}: tensor without sizes", &[iv]))?;
        let mut dims = Vec::with_capacity(sizes.len());
        for &d in sizes {
            dims.push(usize::try_from(d).map_err(|_| self.bad("value {}: negative size {i}", &[iv, d as i64 as u64]))?);
        }
        let sizes = dims;
        let rank = sizes.len() as u64;
        let shape = Shape::new(&sizes).ok_or_else(|| self.bad("value {}: rank {} above 16", &[iv, rank]))?;
        let dim_order = match t.dim_order {
            Some(d) if d.len() != sizes.len() => {
                return Err(self.bad("value {}: dim_order has {} entries for rank {}", &[iv, d.len() as u64, rank]))
            }
            Some(d) => match DimOrder::new(d) {
                Some(order) => order,
                None => {
                    // The first entry out of range or seen before.
                    let k = (0..d.len()).find(|&k| d[k] as usize >= d.len() || d[..k].contains(&d[k])).unwrap_or(0);
                    let at = [iv, k as u64, d.get(k).copied().unwrap_or(0) as u64, rank];
                    return Err(self.bad("value {}: dim_order entry {} is {} (out of range or repeated), not a permutation of 0..{}", &at));
                }
            },
            None => return Err(self.bad("value {}: tensor without dim_order (rank {})", &[iv, rank])),
        };
        let dynamism = match t.shape_dynamism {
            0 => Dynamism::Static,
            1 => Dynamism::DynamicBound,
            2 => return Err(self.unsupported("value {}: DYNAMIC_UNBOUND tensor", &[iv])),
            d => return Err(self.bad("value {}: shape_dynamism {i}", &[iv, d as i64 as u64])),
        };
        if t.storage_offset != 0 {
            return Err(self.bad("value {}: storage_offset must be 0", &[iv]));
        }
        if t.extra_tensor_info.as_ref().is_some_and(|x| x.location == 1) {
            return Err(self.unsupported("value {}: external (.ptd) tensor data", &[iv]));
        }
        let nbytes = shape
            .checked_numel()
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| self.bad("value {}: tensor size overflows", &[iv]))?;
        let idx = t.data_buffer_idx as usize;
        let storage = match (&t.allocation_info, idx) {
            (Some(a), _) => {
                let mem = a.memory_id as usize;
                let arena = mem
                    .checked_sub(1)
                    .and_then(|m| self.arenas.get(m).copied())
                    .ok_or_else(|| self.bad("value {}: memory_id {} has no planned buffer", &[iv, mem as u64]))?;
                let offset = usize::try_from(a.offset())
                    .map_err(|_| self.bad("value {}: offset {} overflows", &[iv, a.offset()]))?;
                let len = self.frame.buffers[arena as usize].as_slice().len();
                if offset.checked_add(nbytes).is_none_or(|e| e > len) {
                    return Err(self.bad(
                        "value {}: {} bytes at offset {} exceed planned buffer {} of {} bytes",
                        &[iv, nbytes as u64, offset as u64, mem as u64, len as u64],
                    ));
                }
                if idx > 0 {
                    self.copy_mutable_init(i, idx, arena, offset, nbytes)?;
                }
                Storage::Buffer { index: arena, offset }
            }
            (None, 0) => {
                // Unplanned: inputs bound later, or outputs the caller would provide.
                let buf = AlignedBuf::try_zeroed(nbytes)
                    .ok_or_else(|| self.bad("value {}: {} bytes cannot be allocated", &[iv, nbytes as u64]))?;
                let index = self.push_buffer(FrameBuffer::Owned(buf));
                Storage::Buffer { index, offset: 0 }
            }
            (None, idx) => self.constant(i, idx, nbytes)?,
        };
        Ok(TensorImpl { dtype, shape, dim_order, dynamism, capacity: nbytes, storage })
    }

    fn constant(&self, i: usize, idx: usize, nbytes: usize) -> Result<Storage, LoadError> {
        let (iv, idxv) = (i as u64, idx as u64);
        if let Some((index, offsets)) = self.constants {
            let off = *offsets
                .get(idx)
                .ok_or_else(|| self.bad("value {}: constant index {} out of range ({})", &[iv, idxv, offsets.len() as u64]))?;
            let len = self.frame.buffers[index as usize].as_slice().len() as u64;
            if off.checked_add(nbytes as u64).is_none_or(|e| e > len) {
                return Err(self.bad(
                    "value {}: constant {} ({} bytes at {}) exceeds the constant segment",
                    &[iv, idxv, nbytes as u64, off],
                ));
            }
            return Ok(Storage::Buffer { index, offset: off as usize });
        }
        match self.inline_constants.get(idx).copied().flatten() {
            Some(index) if self.frame.buffers[index as usize].as_slice().len() >= nbytes => {
                Ok(Storage::Buffer { index, offset: 0 })
            }
            _ => Err(self.bad("value {}: constant buffer {} missing or too small", &[iv, idxv])),
        }
    }

    fn copy_mutable_init(&mut self, i: usize, idx: usize, arena: u32, offset: usize, nbytes: usize) -> Result<(), LoadError> {
        let args = [i as u64, idx as u64];
        let seg = self
            .file
            .program
            .mutable_data_segments
            .as_deref()
            .and_then(|v| v.first())
            .ok_or_else(|| self.bad("value {}: initial data {} but no mutable data segment", &args))?;
        let offsets = seg.offsets.as_deref().unwrap_or(&[]);
        let off = *offsets.get(idx).ok_or_else(|| self.bad("value {}: mutable data index {} out of range", &args))?;
        let data = self.file.segment(seg.segment_index as usize)?;
        let src = usize::try_from(off)
            .ok()
            .and_then(|o| data.get(o..o.checked_add(nbytes)?))
            .ok_or_else(|| self.bad("value {}: mutable data {} exceeds its segment", &args))?;
        match self.frame.buffers[arena as usize].as_mut_slice().and_then(|b| b.get_mut(offset..offset + nbytes)) {
            Some(b) => b.copy_from_slice(src),
            None => return Err(self.invalid("mutable data targets constant memory")),
        }
        Ok(())
    }

    fn index(&self, i: usize, v: i64, n: usize) -> Result<u32, LoadError> {
        usize::try_from(v)
            .ok()
            .filter(|&x| x < n)
            .map(|x| x as u32)
            .ok_or_else(|| self.bad("value {}: reference to value {i} out of range ({} values)", &[i as u64, v as u64, n as u64]))
    }

    /// Value references of a list, each checked against the `n` values of the table.
    fn indices(&self, i: usize, items: &mut dyn Iterator<Item = i64>, n: usize) -> Result<Vec<u32>, LoadError> {
        let mut ids = Vec::with_capacity(items.size_hint().0);
        for x in items {
            ids.push(self.index(i, x, n)?);
        }
        Ok(ids)
    }

    fn value(&mut self, i: usize, v: &schema::EValue<'p>, n: usize) -> Result<Value, LoadError> {
        Ok(match &v.val {
            None | Some(KernelTypes::Null) => Value::None,
            Some(KernelTypes::Int(x)) => Value::Int(x.int_val),
            Some(KernelTypes::Bool(x)) => Value::Bool(x.bool_val),
            Some(KernelTypes::Double(x)) => Value::Double(x.double_val),
            Some(KernelTypes::String(s)) => Value::String(s.string_val.unwrap_or("").to_string()),
            Some(KernelTypes::IntList(l)) => {
                Value::IntList(self.indices(i, &mut l.items.as_deref().unwrap_or(&[]).iter().copied(), n)?)
            }
            Some(KernelTypes::DoubleList(l)) => Value::DoubleList(l.items.clone().unwrap_or_default()),
            Some(KernelTypes::BoolList(l)) => Value::BoolList(l.items.clone().unwrap_or_default()),
            Some(KernelTypes::Tensor(t)) => Value::Tensor(self.tensor(i, t)?),
            Some(KernelTypes::TensorList(l)) => {
                Value::TensorList(self.indices(i, &mut l.items.as_deref().unwrap_or(&[]).iter().map(|&x| x as i64), n)?)
            }
            Some(KernelTypes::OptionalTensorList(l)) => {
                let items = l.items.as_deref().unwrap_or(&[]);
                let mut ids = Vec::with_capacity(items.len());
                for &x in items {
                    ids.push(if x == -1 { None } else { Some(self.index(i, x as i64, n)?) });
                }
                Value::OptionalTensorList(ids)
            }
        })
    }
}

pub(super) fn load_method<'p>(
    file: &PteFile<'p>,
    plan: &ExecutionPlan<'p>,
    kernels: &KernelRegistry,
    backends: &BackendRegistry,
    placed_arenas: Option<Vec<&'p mut [u8]>>,
) -> Result<Method<'p>, LoadError> {
    let method = plan.name.unwrap_or("").to_string();
    let mut l = Loader { file, method: method.clone(), frame: Frame::new(), arenas: Vec::new(), constants: None, inline_constants: Vec::new() };

    // Constants: one segment viewed in place, or (deprecated) inline buffers.
    if let Some((bytes, offsets)) = file.constant_segment()? {
        let index = l.push_buffer(FrameBuffer::Const(bytes));
        l.constants = Some((index, offsets));
    } else if let Some(bufs) = &file.program.constant_buffer {
        for b in bufs {
            let index = b.storage.map(|s| l.push_buffer(FrameBuffer::Const(s)));
            l.inline_constants.push(index);
        }
    }

    // Planned arenas: non_const_buffer_sizes[0] is a placeholder; memory_id is 1-based.
    let sizes = plan.non_const_buffer_sizes.as_deref().ok_or_else(|| l.invalid("non_const_buffer_sizes missing"))?;
    let planned = sizes.len().saturating_sub(1);
    let mut placed = placed_arenas.map(|a| a.into_iter());
    if let Some(given) = placed.as_ref().map(|a| a.len()).filter(|&n| n != planned) {
        return Err(l.bad("the method plans {} memory arena(s), the caller placed {}", &[planned as u64, given as u64]));
    }
    for (k, &s) in sizes.iter().enumerate().skip(1) {
        let k = k as u64;
        let s = usize::try_from(s).map_err(|_| l.bad("planned buffer {} has negative size {i}", &[k, s as u64]))?;
        let buffer = match placed.as_mut().and_then(Iterator::next) {
            Some(arena) if arena.len() < s => {
                return Err(l.bad("planned buffer {} needs {} bytes, the placed arena has {}", &[k, s as u64, arena.len() as u64]))
            }
            Some(arena) if arena.as_ptr() as usize % core::mem::align_of::<u128>() != 0 => {
                return Err(l.bad("placed arena {} is not {}-byte aligned", &[k, core::mem::align_of::<u128>() as u64]))
            }
            Some(arena) => FrameBuffer::Borrowed(arena),
            None => FrameBuffer::Owned(
                AlignedBuf::try_zeroed(s).ok_or_else(|| l.bad("planned buffer {} of {} bytes cannot be allocated", &[k, s as u64]))?,
            ),
        };
        let index = l.push_buffer(buffer);
        l.arenas.push(index);
    }

    let evalues = plan.values.as_deref().ok_or_else(|| l.invalid("values missing"))?;
    let n = evalues.len();
    for (i, v) in evalues.iter().enumerate() {
        let value = l.value(i, v, n)?;
        l.frame.values.push(value);
    }

    let io = |l: &Loader, list: &Option<Vec<i32>>, missing: &str| -> Result<Vec<u32>, LoadError> {
        let list = list.as_deref().ok_or_else(|| l.invalid(missing))?;
        l.indices(0, &mut list.iter().map(|&x| x as i64), n)
    };
    let inputs = io(&l, &plan.inputs, "inputs missing")?;
    let outputs = io(&l, &plan.outputs, "outputs missing")?;

    // Resolve kernels; every missing operator is collected before failing.
    let operators = plan.operators.as_deref().unwrap_or(&[]);
    let op_keys: Vec<String> = operators.iter().map(|o| o.key()).collect();
    // Sorted and without duplicates.
    let mut missing: Vec<String> = Vec::new();
    let mut chains = Vec::new();
    for (c, chain) in plan.chains.as_deref().unwrap_or(&[]).iter().enumerate() {
        let mut instrs = Vec::new();
        let instructions = chain.instructions.as_deref().ok_or_else(|| l.bad("chain {} has no instructions", &[c as u64]))?;
        for (k, ins) in instructions.iter().enumerate() {
            let at = [c as u64, k as u64];
            let bad = |what: &str| l.bad(what, &at);
            let checked = |x: i32| l.index(0, x as i64, n);
            let args = |list: &Option<Vec<i32>>| l.indices(0, &mut list.as_deref().unwrap_or(&[]).iter().map(|&x| x as i64), n);
            let instr = match &ins.instr_args {
                Some(InstructionArguments::KernelCall(kc)) => {
                    let op = usize::try_from(kc.op_index)
                        .ok()
                        .filter(|&o| o < op_keys.len())
                        .ok_or_else(|| bad("chain {} instruction {}: operator index out of range"))?;
                    let args = args(&kc.args)?;
                    if op_keys[op] == ET_VIEW {
                        Instr::View { op: op as u32, args }
                    } else {
                        match kernels.lookup(&op_keys[op]) {
                            Some(kernel) => Instr::Kernel { op: op as u32, kernel, args },
                            None => {
                                if let Err(at) = missing.binary_search(&op_keys[op]) {
                                    // Into place by swaps: Vec::insert would link a memmove.
                                    missing.push(op_keys[op].clone());
                                    for j in (at + 1..missing.len()).rev() {
                                        missing.swap(j, j - 1);
                                    }
                                }
                                continue;
                            }
                        }
                    }
                }
                Some(InstructionArguments::DelegateCall(dc)) => {
                    let d = usize::try_from(dc.delegate_index).map_err(|_| bad("chain {} instruction {}: delegate index negative"))?;
                    let args = args(&dc.args)?;
                    Instr::Delegate { delegate: d as u32, args }
                }
                Some(InstructionArguments::MoveCall(m)) => Instr::Move { from: checked(m.move_from)?, to: checked(m.move_to)? },
                Some(InstructionArguments::JumpFalseCall(j)) => Instr::JumpFalse {
                    cond: checked(j.cond_value_index)?,
                    dest: u32::try_from(j.destination_instruction)
                        .map_err(|_| bad("chain {} instruction {}: negative jump destination"))?,
                },
                Some(InstructionArguments::FreeCall(f)) => Instr::Free { value: checked(f.value_index)? },
                None => return Err(bad("chain {} instruction {}: instruction without arguments")),
            };
            instrs.push(instr);
        }
        chains.push(instrs);
    }
    if !missing.is_empty() {
        return Err(LoadError::MissingOperators { method, ops: missing });
    }
    for (c, instrs) in chains.iter().enumerate() {
        for ins in instrs {
            if let Instr::JumpFalse { dest, .. } = ins {
                if *dest as usize > instrs.len() {
                    return Err(l.bad("chain {}: jump to {} past the end", &[c as u64, *dest as u64]));
                }
            }
        }
    }

    // Delegates, initialized in order.
    let mut delegates = Vec::new();
    for d in plan.delegates.as_deref().unwrap_or(&[]) {
        let id = d.id.unwrap_or("");
        let backend = backends
            .get(id)
            .ok_or_else(|| LoadError::BackendNotAvailable { method: method.clone(), id: id.to_string() })?;
        let blob = file.delegate_data(d)?;
        let specs: Vec<CompileSpec> = d
            .compile_specs
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .map(|s| CompileSpec { key: s.key.unwrap_or(""), value: s.value.unwrap_or(&[]) })
            .collect();
        let named = |k: &str| file.named_data(k).ok().flatten();
        let ctx = BackendInitContext { named_data: &named };
        let handle = backend.init(&ctx, blob, &specs).map_err(|message| LoadError::BackendInit {
            method: method.clone(),
            id: id.to_string(),
            message,
        })?;
        delegates.push(handle);
    }
    for instrs in &chains {
        for ins in instrs {
            if let Instr::Delegate { delegate, .. } = ins {
                if *delegate as usize >= delegates.len() {
                    return Err(l.bad("delegate call to {} of {}", &[*delegate as u64, delegates.len() as u64]));
                }
            }
        }
    }

    let io: Vec<u32> = inputs.iter().chain(&outputs).copied().collect();
    let folded_bytes = super::fold::fold_constants(&mut l.frame, &mut chains, &op_keys, &io);

    let input_set = alloc::vec![false; inputs.len()];
    Ok(Method {
        name: method,
        frame: l.frame,
        chains,
        op_names: op_keys,
        delegates: delegates.into_iter().map(|d: Box<_>| d).collect(),
        inputs,
        outputs,
        input_set,
        folded_bytes,
    })
}
