//! The device-independent schedule of one delegate call: shapes bound and checked as the CPU
//! reference does (same errors), then the kernel launches (`Dispatch`: kernel, parameter words,
//! bindings, grid) every GPU runtime executes with its own kernel set. The wgpu runtime runs them
//! as WGSL compute shaders, the CUDA runtime as the same kernels written in CUDA C; both read
//! the same parameter words, so one planner serves both.

use rbuild_kernels::gpu_reference::{HostData, HostTensor};
use rbuild_runtime::backends::gpu::payload::{checked_numel, describe, DType, Dim, Op, Payload, StateInit, ValueDef, ValueId, ValueKind};

use crate::{data, ops, Kernel};

type R<T = ()> = Result<T, String>;

/// Bytes of one dispatch's parameters in the uniform buffer (the largest offset alignment
/// WebGPU allows, so every adapter accepts the offsets).
pub const PARAM_BYTES: usize = 256;
pub const PARAM_WORDS: usize = PARAM_BYTES / 4;

/// What a kernel binding refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bind {
    Value(ValueId),
    /// A small buffer for an optional operand the kernel ignores (no bias, no position).
    Dummy,
    /// Per-op error flags the kernels set (index out of range, bad position).
    Status,
    /// The indirect grids of dispatches guarded by a device-side `if_zero`.
    Indirect,
    /// The constant table an op built at init (`rope` frequencies), by op index.
    OpTable(usize),
    /// Scratch for split-key attention's partial results.
    Scratch,
}

/// One kernel launch of a run.
pub struct Dispatch {
    pub kernel: Kernel,
    pub params: [u32; PARAM_WORDS],
    pub binds: Vec<Bind>,
    pub groups: [u32; 3],
    /// Slot of this dispatch's grid in the indirect buffer when an `if_zero` computed on the
    /// device guards it.
    pub indirect: Option<u32>,
    /// The op it belongs to (profiles).
    pub op: usize,
}

/// GPU time of one dispatch of the last profiled run (see [`GpuProgram::set_profiling`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchTime {
    /// Op index and name in the payload.
    pub op: usize,
    pub op_name: &'static str,
    /// The kernel's source file (e.g. `attention.wgsl`, `attention.cu`).
    pub kernel: &'static str,
    pub nanos: f64,
}

/// The per-run view the op planners work on: shapes of every value known so far, the symbol
/// sizes of this call, and the dispatches recorded so far.
pub struct Plan<'a> {
    pub payload: &'a Payload,
    pub dims: Vec<Option<Vec<usize>>>,
    pub env: Vec<Option<usize>>,
    pub dispatches: Vec<Dispatch>,
    /// Values of scalar index inputs, known on the host (used for the reference's position
    /// checks; positions computed on the device are checked by the kernels).
    pub host_scalars: Vec<Option<i64>>,
    /// The op being planned.
    pub index: usize,
    /// Largest dispatch grid dimension.
    pub max_groups: u32,
    /// While planning a range guarded by a device-side `if_zero`: its last op index.
    pub guard_until: Option<usize>,
    /// Indirect grid slots handed out in this run.
    pub indirect_slots: u32,
}

impl Plan<'_> {
    pub fn name(&self, id: ValueId) -> String {
        describe(&self.payload.values[id as usize], id)
    }

    pub fn dtype(&self, id: ValueId) -> DType {
        self.payload.values[id as usize].meta.dtype
    }

    pub fn code(&self, id: ValueId) -> u32 {
        data::device_code(self.dtype(id))
    }

    pub fn dims(&self, id: ValueId) -> R<Vec<usize>> {
        self.dims[id as usize].clone().ok_or_else(|| format!("{} has no contents", self.name(id)))
    }

    pub fn output(&self) -> ValueId {
        self.payload.ops[self.index].outputs[0]
    }

    pub fn out_dtype(&self) -> DType {
        self.dtype(self.output())
    }

    /// A weight's dims: a float tensor, or a grouped quantized constant (`linear` weights and
    /// `embedding` tables, dequantized in the kernel).
    pub fn weight_dims(&self, id: ValueId) -> R<Vec<usize>> {
        if self.dtype(id).is_quantized() {
            self.dims(id)
        } else {
            self.float_dims(id)
        }
    }

    /// Kernel params of a weight: `(columns, group size, scales dtype)` and the scales' binding
    /// (a dummy for a float weight).
    pub fn quant(&self, id: ValueId) -> ([u32; 3], Bind) {
        match self.payload.values[id as usize].meta.quant {
            Some(q) => {
                let cols = self.dims[id as usize].as_ref().and_then(|d| d.last().copied()).unwrap_or(1) as u32;
                ([cols, q.group_size, self.code(q.scales)], Bind::Value(q.scales))
            }
            None => ([0, 1, 1], Bind::Dummy),
        }
    }

    /// A float tensor's dims (quantized values are rejected here).
    pub fn float_dims(&self, id: ValueId) -> R<Vec<usize>> {
        let d = self.dtype(id);
        if !d.is_float() {
            return Err(format!("{} is {}, a float tensor is needed", self.name(id), d.name()));
        }
        self.dims(id)
    }

    pub fn float_out(&self) -> R {
        let id = self.output();
        let d = self.dtype(id);
        if !d.is_float() {
            return Err(format!("output {} is {}, this op produces a float tensor", self.name(id), d.name()));
        }
        Ok(())
    }

    /// Binds `dims` to a value's declared dims (fixed sizes must match, symbols lie in their
    /// bounds and agree with this call's earlier bindings), as the reference does.
    pub fn bind(&mut self, id: ValueId, dims: &[usize], what: &str) -> R {
        self.payload.bind_dims(&mut self.env, id, dims, what)?;
        self.dims[id as usize] = Some(dims.to_vec());
        Ok(())
    }

    /// Binds the op's output to `dims`.
    pub fn put(&mut self, dims: Vec<usize>) -> R {
        let id = self.output();
        self.bind(id, &dims, "output")
    }

    /// The output value's dims with symbols resolved; one unbound symbol is inferred from `total`.
    pub fn output_dims(&self, total: usize) -> R<Vec<usize>> {
        self.payload.resolve_output_dims(&self.env, self.output(), total)
    }

    /// A scalar position operand: checks its shape; its value when it is known on the host.
    pub fn position(&self, id: ValueId) -> R<Option<usize>> {
        let d = self.dims(id)?;
        if !self.dtype(id).is_index() {
            return Err(format!("position {} is {}, an i32/i64 tensor is needed", self.name(id), self.dtype(id).name()));
        }
        if checked_numel(&d) != Some(1) {
            return Err(format!("position {} has {} elements, needs 1", self.name(id), checked_numel(&d).unwrap_or(usize::MAX)));
        }
        match self.host_scalars[id as usize] {
            Some(p) => usize::try_from(p).map(Some).map_err(|_| format!("position {} = {p} is negative", self.name(id))),
            None => Ok(None),
        }
    }

    /// Grid for `n` threads in workgroups of `size` (2-D past the per-dimension limit).
    pub fn grid(&self, n: usize, size: usize) -> R<[u32; 3]> {
        let groups = n.div_ceil(size);
        let max = self.max_groups as usize;
        let x = groups.min(max);
        let y = if x == 0 { 0 } else { groups.div_ceil(x) };
        if y > max {
            return Err(format!("{n} elements exceed the adapter's dispatch limit"));
        }
        Ok([x as u32, y as u32, 1])
    }

    pub fn dispatch(&mut self, kernel: Kernel, params: [u32; PARAM_WORDS], binds: Vec<Bind>, groups: [u32; 3]) {
        if groups.iter().all(|&g| g > 0) {
            let indirect = match self.guard_until {
                Some(last) if self.index <= last => {
                    self.indirect_slots += 1;
                    Some(self.indirect_slots - 1)
                }
                _ => None,
            };
            self.dispatches.push(Dispatch { kernel, params, binds, groups, indirect, op: self.index });
        }
    }
}

/// Ends a device-side `if_zero` range: the gate zeroes the grids of the slots handed out since.
pub fn close_gate(plan: &mut Plan<'_>, gate: Option<(usize, u32)>) {
    if let Some((at, first)) = gate {
        let d = &mut plan.dispatches[at].params;
        d[0] = first * 3;
        d[1] = (plan.indirect_slots - first) * 3;
    }
    plan.guard_until = None;
}

/// Shares activation buffers by liveness: an activation's buffer is free for outputs of ops
/// after its last use (strictly after, so no op reads and writes one buffer). Reshape outputs
/// alias their input (`storage_of`), so a storage root lives as long as any alias; delegate
/// outputs live to the end. Returns each buffer (size) with the activation roots it holds.
pub fn plan_activations(payload: &Payload, storage_of: &[ValueId], bytes: &[u64]) -> Vec<(Vec<ValueId>, u64)> {
    let n = payload.values.len();
    let is_act = |id: ValueId| matches!(payload.values[id as usize].kind, ValueKind::Activation);
    let mut last = vec![0usize; n];
    for (index, node) in payload.ops.iter().enumerate() {
        for &id in node.inputs.iter().chain(&node.outputs) {
            let r = storage_of[id as usize] as usize;
            last[r] = last[r].max(index);
        }
    }
    for &id in &payload.outputs {
        last[storage_of[id as usize] as usize] = usize::MAX;
    }
    // (size, last use, roots) per buffer; free ones are reused best-fit, growing if needed.
    let mut pool: Vec<(u64, usize, Vec<ValueId>)> = Vec::new();
    for (index, node) in payload.ops.iter().enumerate() {
        for &out in &node.outputs {
            if storage_of[out as usize] != out || !is_act(out) {
                continue;
            }
            let need = bytes[out as usize];
            let free = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.1 < index)
                .min_by_key(|(_, b)| (b.0 < need, b.0.abs_diff(need)))
                .map(|(i, _)| i);
            match free {
                Some(i) => {
                    let b = &mut pool[i];
                    b.0 = b.0.max(need);
                    b.1 = last[out as usize];
                    b.2.push(out);
                }
                None => pool.push((need, last[out as usize], vec![out])),
            }
        }
    }
    // Aliases (reshape outputs) take their root's buffer.
    let mut out: Vec<(Vec<ValueId>, u64)> = pool.into_iter().map(|(size, _, roots)| (roots, size)).collect();
    for (roots, _) in &mut out {
        let extra: Vec<ValueId> =
            (0..n as ValueId).filter(|&id| storage_of[id as usize] != id && roots.contains(&storage_of[id as usize])).collect();
        roots.extend(extra);
    }
    out
}

/// Every dim of a value at its largest (symbols at their max).
pub fn max_dims(p: &Payload, v: &ValueDef) -> Vec<u64> {
    v.meta.dims.iter().map(|d| match *d {
        Dim::Fixed(n) => n,
        Dim::Symbol(s) => p.symbols[s as usize].max,
    }).collect()
}


/// One call's work: the delegate inputs as device words, the launches in order, the shapes of
/// the delegate outputs, and how many grid slots guarded (`if_zero` on the device) launches use.
pub struct Call {
    pub uploads: Vec<(ValueId, Vec<u32>)>,
    pub dispatches: Vec<Dispatch>,
    pub out_dims: Vec<Vec<usize>>,
    pub indirect_slots: u32,
}

/// Plans a call of `p` on `inputs` (delegate-input order), with the same checks and errors as
/// the CPU reference's `Interpreter::run`. `const_scalars`: values of one-element integer
/// constants (see [`const_scalar`]); `max_groups`: the device's largest grid dimension.
pub fn plan_call(p: &Payload, const_scalars: &[Option<i64>], max_groups: u32, inputs: &[HostTensor]) -> R<Call> {
    let ni = p.inputs.len();
    if inputs.len() != ni {
        return Err(format!("the payload takes {ni} input(s), got {}", inputs.len()));
    }
    let mut plan = Plan {
        payload: p,
        dims: vec![None; p.values.len()],
        env: vec![None; p.symbols.len()],
        dispatches: Vec::new(),
        host_scalars: const_scalars.to_vec(),
        index: 0,
        max_groups,
        guard_until: None,
        indirect_slots: 0,
    };
    for (i, v) in p.values.iter().enumerate() {
        if matches!(v.kind, ValueKind::Constant { .. } | ValueKind::State { .. }) {
            plan.dims[i] = Some(max_dims(p, v).iter().map(|&d| d as usize).collect());
        }
    }
    let mut uploads = Vec::with_capacity(ni);
    for (pos, t) in inputs.iter().enumerate() {
        let id = p.inputs[pos];
        let v = &p.values[id as usize];
        let what = format!("delegate input {pos}");
        if t.dtype != v.meta.dtype {
            return Err(format!("{what}: {} is {}, got {}", describe(v, id), v.meta.dtype.name(), t.dtype.name()));
        }
        if checked_numel(&t.dims) != Some(t.data.len()) {
            return Err(format!("{what}: shape {:?} does not match its {} element(s)", t.dims, t.data.len()));
        }
        let kind_ok = matches!(
            (&t.data, t.dtype.is_float(), t.dtype.is_index()),
            (HostData::F32(_), true, _) | (HostData::I64(_), _, true) | (HostData::Bool(_), false, false)
        );
        if !kind_ok {
            return Err(format!("{what}: elements do not match dtype {}", t.dtype.name()));
        }
        plan.bind(id, &t.dims, &what)?;
        if let HostData::I64(d) = &t.data {
            if d.len() == 1 {
                plan.host_scalars[id as usize] = Some(d[0]);
            }
        }
        uploads.push((id, data::tensor_to_words(t, &format!("{what} ({})", describe(v, id)))?));
    }
    let mut index = 0;
    // The open device-side guard: (its gate dispatch, its first indirect slot).
    let mut gate: Option<(usize, u32)> = None;
    while index < p.ops.len() {
        plan.index = index;
        let err = |m: String| format!("op {index} (`{}`): {m}", p.ops[index].op.name());
        if let Some(last) = plan.guard_until {
            if index > last {
                close_gate(&mut plan, gate.take());
            }
        }
        if let Op::IfZero { count } = p.ops[index].op {
            let flag = p.ops[index].inputs[0];
            match ops::flag(&plan, flag).map_err(err)? {
                // Known on the host (a delegate input or constant): skip or run the range
                // exactly as the reference does.
                Some(0) => {}
                Some(_) => {
                    index += 1 + count as usize;
                    continue;
                }
                // Computed on the device: the range's dispatches become indirect and a gate
                // kernel zeroes their grids when the flag is not 0.
                None => {
                    let mut pr = ops::params();
                    pr[0] = 0;
                    plan.dispatches.push(Dispatch {
                        kernel: Kernel::Gate,
                        params: pr,
                        binds: vec![Bind::Value(flag), Bind::Indirect],
                        groups: [1, 1, 1],
                        indirect: None,
                        op: index,
                    });
                    gate = Some((plan.dispatches.len() - 1, plan.indirect_slots));
                    plan.guard_until = Some(index + count as usize);
                }
            }
            index += 1;
            continue;
        }
        ops::plan_op(&mut plan).map_err(err)?;
        index += 1;
    }
    close_gate(&mut plan, gate.take());
    let mut out_dims = Vec::with_capacity(p.outputs.len());
    for (pos, &id) in p.outputs.iter().enumerate() {
        match &plan.dims[id as usize] {
            Some(d) => out_dims.push(d.clone()),
            None => return Err(format!("delegate output {pos} ({}) was not produced", describe(&p.values[id as usize], id))),
        }
    }
    let indirect_slots = plan.indirect_slots;
    Ok(Call { uploads, dispatches: plan.dispatches, out_dims, indirect_slots })
}


/// The value whose buffer holds each value's elements: `reshape` outputs alias their input (the
/// element order is unchanged), every other value is its own root.
pub fn storage_roots(p: &Payload) -> Vec<ValueId> {
    let mut storage_of: Vec<ValueId> = (0..p.values.len() as ValueId).collect();
    for node in &p.ops {
        if matches!(node.op, Op::Reshape) {
            storage_of[node.outputs[0] as usize] = storage_of[node.inputs[0] as usize];
        }
    }
    storage_of
}

/// Quantized constants are dequantized inside `linear` (weight) and `embedding` (table) only;
/// names the op that uses one anywhere else. `runtime` names the runtime in the message.
pub fn check_quantized_uses(p: &Payload, runtime: &str) -> R {
    for (index, node) in p.ops.iter().enumerate() {
        for (slot, &id) in node.inputs.iter().enumerate() {
            let v = &p.values[id as usize];
            let ok = match node.op {
                Op::Linear { .. } => slot == 1,
                Op::Embedding => slot == 0,
                _ => false,
            };
            if v.meta.dtype.is_quantized() && !ok {
                return Err(format!(
                    "op {index} (`{}`): {} has dtype {}, which the {runtime} runtime takes only as a `linear` weight or an `embedding` table",
                    node.op.name(),
                    describe(v, id),
                    v.meta.dtype.name()
                ));
            }
        }
    }
    Ok(())
}

/// The packed size of a grouped int8/int4 constant and a check of its scales, with the CPU
/// reference's errors: `(bytes, rows, row bytes)` for `dims` (symbols at their max).
pub fn quantized_layout(p: &Payload, id: ValueId, group: u32, scales: ValueId) -> R<(usize, usize, usize)> {
    let v = &p.values[id as usize];
    let what = describe(v, id);
    let dims: Vec<usize> = max_dims(p, v).iter().map(|&d| d as usize).collect();
    let cols = dims.last().copied().unwrap_or(1);
    let rows = if dims.is_empty() { 1 } else { checked_numel(&dims[..dims.len() - 1]).ok_or_else(|| format!("{what}: shape overflows"))? };
    let row_bytes = if v.meta.dtype == DType::QInt8Grouped { cols } else { cols.div_ceil(2) };
    let need = rows.checked_mul(row_bytes).ok_or_else(|| format!("{what}: shape overflows"))?;
    let groups = cols.div_ceil(group as usize);
    let sv = &p.values[scales as usize];
    let sd = max_dims(p, sv);
    if !sv.meta.dtype.is_float() || sd.len() != 2 || sd[0] as usize != rows || sd[1] as usize != groups {
        return Err(format!(
            "{what}: scales {} are {} {sd:?}, expected a float [{rows}, {groups}] (group size {group})",
            describe(sv, scales),
            sv.meta.dtype.name()
        ));
    }
    Ok((need, rows, row_bytes))
}

/// The device words a constant or a state initialized from `named_data` starts with (`None`
/// for other values), its bytes checked against its dtype and shape with the reference's
/// errors. Quantized constants are the caller's ([`quantized_bytes`]).
pub fn initial_words<'d>(p: &Payload, id: ValueId, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> R<Option<Vec<u32>>> {
    let v = &p.values[id as usize];
    let key = match &v.kind {
        ValueKind::Constant { key } | ValueKind::State { init: StateInit::Named(key) } => key,
        _ => return Ok(None),
    };
    let what = describe(v, id);
    let dims = max_dims(p, v);
    let n = dims.iter().try_fold(1u128, |a, &d| a.checked_mul(d as u128)).unwrap_or(u128::MAX);
    let raw = named_data(key).ok_or_else(|| format!("{what}: named_data key `{key}` is not in the program"))?;
    let esize = data::element_bytes(v.meta.dtype).unwrap_or(1) as u128;
    if raw.len() as u128 != n.saturating_mul(esize) {
        return Err(format!(
            "{what} (named_data `{key}`): has {} bytes, dtype {} shape {dims:?} needs {}",
            raw.len(),
            v.meta.dtype.name(),
            n.saturating_mul(esize)
        ));
    }
    data::bytes_to_words(v.meta.dtype, raw, &format!("{what} (named_data `{key}`)")).map(Some)
}

/// The value of a one-element integer constant given its device words (positions and flags
/// the host can check and skip on), else `None`.
pub fn const_scalar(v: &ValueDef, words: &[u32]) -> Option<i64> {
    let scalar = matches!(v.kind, ValueKind::Constant { .. }) && v.meta.dtype.is_index() && words.len() == 1;
    scalar.then(|| words[0] as i32 as i64)
}

/// The packed bytes of a grouped int8/int4 constant from `named_data`, checked against its
/// layout ([`quantized_layout`]) with the reference's errors.
pub fn quantized_bytes<'d>(p: &Payload, id: ValueId, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> R<&'d [u8]> {
    let v = &p.values[id as usize];
    let what = describe(v, id);
    let (ValueKind::Constant { key }, Some(q)) = (&v.kind, v.meta.quant) else {
        return Err(format!("{what} is not a quantized constant"));
    };
    let (need, rows, row_bytes) = quantized_layout(p, id, q.group_size, q.scales)?;
    let bytes = named_data(key).ok_or_else(|| format!("{what}: named_data key `{key}` is not in the program"))?;
    if bytes.len() != need {
        return Err(format!(
            "{what} (named_data `{key}`): has {} bytes, {} shape {:?} needs {need} ({rows} row(s) of {row_bytes})",
            bytes.len(),
            v.meta.dtype.name(),
            max_dims(p, v)
        ));
    }
    Ok(bytes)
}
