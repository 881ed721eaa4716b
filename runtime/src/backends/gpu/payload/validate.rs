//! Graph well-formedness: everything a runtime may rely on without re-checking.

use alloc::format;
use alloc::string::String;
use alloc::vec;

use super::error::{ErrorKind, PayloadError};
use super::*;

fn invalid(message: String) -> PayloadError {
    PayloadError::graph(ErrorKind::Invalid, message)
}

fn describe(p: &Payload, id: ValueId) -> String {
    match p.values.get(id as usize) {
        Some(v) => format!("value {id} `{}`", v.name),
        None => format!("value {id}"),
    }
}

pub(super) fn validate(p: &Payload) -> Result<(), PayloadError> {
    let value_count = p.values.len();
    let in_range = |id: ValueId, what: &dyn Fn() -> String| -> Result<&ValueDef, PayloadError> {
        p.values
            .get(id as usize)
            .ok_or_else(|| PayloadError::graph(ErrorKind::OutOfRange, format!("{} is value {id}, there are {value_count}", what())))
    };

    for (i, s) in p.symbols.iter().enumerate() {
        if s.max == 0 || s.min > s.max {
            return Err(invalid(format!("symbol {i} `{}` has bounds {}..={}, needs 0 <= min <= max, max >= 1", s.name, s.min, s.max)));
        }
    }

    for (i, v) in p.values.iter().enumerate() {
        let what = || format!("value {i} `{}`", v.name);
        if v.meta.dims.len() > MAX_RANK {
            return Err(invalid(format!("{} has rank {}, at most {MAX_RANK}", what(), v.meta.dims.len())));
        }
        for d in &v.meta.dims {
            if let Dim::Symbol(s) = *d {
                if s as usize >= p.symbols.len() {
                    return Err(PayloadError::graph(
                        ErrorKind::OutOfRange,
                        format!("{} has a dynamic dim on symbol {s}, which is not defined ({} symbol(s))", what(), p.symbols.len()),
                    ));
                }
            }
        }
        let all_fixed = v.meta.dims.iter().all(|d| matches!(d, Dim::Fixed(_)));
        match &v.kind {
            ValueKind::Constant { key } | ValueKind::State { init: StateInit::Named(key) } if key.is_empty() => {
                return Err(invalid(format!("{} names an empty named_data key", what())));
            }
            // Constants and state are allocated once at init, so their shapes must be known then.
            ValueKind::Constant { .. } | ValueKind::State { .. } if !all_fixed => {
                return Err(invalid(format!("{} is constant or state but has a dynamic dim", what())));
            }
            _ => {}
        }
        if matches!(v.kind, ValueKind::State { .. }) && !v.meta.dtype.is_float() {
            return Err(invalid(format!("{} is state of dtype {}, state must be f32/f16/bf16", what(), v.meta.dtype.name())));
        }
        match (v.meta.dtype.is_quantized(), v.meta.quant) {
            (false, None) => {}
            (false, Some(_)) => return Err(invalid(format!("{} has group scales but dtype {}", what(), v.meta.dtype.name()))),
            (true, None) => return Err(invalid(format!("{} is {} without group scales", what(), v.meta.dtype.name()))),
            (true, Some(q)) => {
                if !matches!(v.kind, ValueKind::Constant { .. }) {
                    return Err(invalid(format!("{} is quantized but not a constant (quantization is weight-only)", what())));
                }
                if q.group_size == 0 {
                    return Err(invalid(format!("{} has group size 0", what())));
                }
                let scales = in_range(q.scales, &|| format!("{} scales", what()))?;
                if !matches!(scales.kind, ValueKind::Constant { .. }) || !scales.meta.dtype.is_float() {
                    return Err(invalid(format!("{} scales ({}) must be a float constant", what(), describe(p, q.scales))));
                }
            }
        }
    }

    // Delegate inputs: exactly the Input values, each once.
    let mut listed = vec![false; value_count];
    for (pos, &id) in p.inputs.iter().enumerate() {
        let v = in_range(id, &|| format!("delegate input {pos}"))?;
        if !matches!(v.kind, ValueKind::Input) {
            return Err(invalid(format!("delegate input {pos} is {}, which is not of kind input", describe(p, id))));
        }
        if core::mem::replace(&mut listed[id as usize], true) {
            return Err(invalid(format!("delegate input {pos}: {} is listed twice", describe(p, id))));
        }
    }
    if let Some(i) = p.values.iter().enumerate().position(|(i, v)| matches!(v.kind, ValueKind::Input) && !listed[i]) {
        return Err(invalid(format!("{} is of kind input but not in the delegate input list", describe(p, i as ValueId))));
    }

    // Ops in order: every input defined before use, every activation produced exactly once.
    let mut defined: alloc::vec::Vec<bool> = p.values.iter().map(|v| !matches!(v.kind, ValueKind::Activation)).collect();
    // `if_zero` ranges: the op index of the guard that produced each value (if any), and the
    // range (guard index, first op after it) being walked. Values a guarded op produces may only
    // be used inside that range: when it is skipped they do not exist.
    let mut guarded_by: alloc::vec::Vec<Option<usize>> = vec![None; value_count];
    let mut guard: Option<(usize, usize)> = None;
    for (index, node) in p.ops.iter().enumerate() {
        if guard.is_some_and(|(_, end)| index >= end) {
            guard = None;
        }
        let name = node.op.name();
        // Attribute value rules (finite positive eps, a real permutation, ...) live in the
        // decoder; running it here keeps hand-built payloads to the same rules as parsed ones.
        Op::decode(node.op.code(), &node.op.attrs())
            .map_err(|m| PayloadError::graph(ErrorKind::BadAttribute, format!("op {index}: {m}")))?;
        let (min_in, max_in, outs) = node.op.arity();
        if node.inputs.len() < min_in || node.inputs.len() > max_in {
            return Err(invalid(format!("op {index} (`{name}`) has {} input(s), takes {min_in}..={max_in}", node.inputs.len())));
        }
        if node.outputs.len() != outs {
            return Err(invalid(format!("op {index} (`{name}`) has {} output(s), takes {outs}", node.outputs.len())));
        }
        for (slot, &id) in node.inputs.iter().enumerate() {
            in_range(id, &|| format!("op {index} (`{name}`) input {slot}"))?;
            if !defined[id as usize] {
                return Err(invalid(format!("op {index} (`{name}`) input {slot} uses {} before any op produces it", describe(p, id))));
            }
            if let Some(g) = guarded_by[id as usize] {
                if guard.map(|(open, _)| open) != Some(g) {
                    return Err(invalid(format!(
                        "op {index} (`{name}`) input {slot} uses {}, produced inside the `if_zero` range of op {g}, from outside it",
                        describe(p, id)
                    )));
                }
            }
        }
        if let Op::IfZero { count } = node.op {
            if let Some((open, _)) = guard {
                return Err(invalid(format!("op {index} (`if_zero`) is inside the range of op {open}: ranges do not nest")));
            }
            let end = index + 1 + count as usize;
            if end > p.ops.len() {
                return Err(invalid(format!("op {index} (`if_zero`) guards {count} op(s), only {} follow it", p.ops.len() - index - 1)));
            }
            guard = Some((index, end));
        }
        for (slot, &id) in node.outputs.iter().enumerate() {
            let v = in_range(id, &|| format!("op {index} (`{name}`) output {slot}"))?;
            if !matches!(v.kind, ValueKind::Activation) {
                return Err(invalid(format!("op {index} (`{name}`) output {slot} writes {}, which is not an activation", describe(p, id))));
            }
            if core::mem::replace(&mut defined[id as usize], true) {
                return Err(invalid(format!("op {index} (`{name}`) output {slot}: {} is produced twice", describe(p, id))));
            }
            guarded_by[id as usize] = guard.map(|(open, _)| open);
        }
        check_operands(p, index, node)?;
    }

    let mut seen = vec![false; value_count];
    for (pos, &id) in p.outputs.iter().enumerate() {
        let v = in_range(id, &|| format!("delegate output {pos}"))?;
        if !matches!(v.kind, ValueKind::Activation) || !defined[id as usize] {
            return Err(invalid(format!("delegate output {pos} is {}, which no op produces", describe(p, id))));
        }
        if let Some(g) = guarded_by[id as usize] {
            return Err(invalid(format!("delegate output {pos} ({}) is produced inside the `if_zero` range of op {g}", describe(p, id))));
        }
        if core::mem::replace(&mut seen[id as usize], true) {
            return Err(invalid(format!("delegate output {pos}: {} is listed twice", describe(p, id))));
        }
    }
    Ok(())
}

/// Per-op dtype / rank rules that are cheap and catch partitioner bugs early.
fn check_operands(p: &Payload, index: usize, node: &OpNode) -> Result<(), PayloadError> {
    let name = node.op.name();
    let meta = |slot: usize| &p.values[node.inputs[slot] as usize].meta;
    let rank = |slot: usize| meta(slot).dims.len() as i64;
    let need_index = |slot: usize, what: &str| -> Result<(), PayloadError> {
        if meta(slot).dtype.is_index() {
            Ok(())
        } else {
            Err(invalid(format!("op {index} (`{name}`) {what} ({}) must be i32 or i64, is {}", describe(p, node.inputs[slot]), meta(slot).dtype.name())))
        }
    };
    let need_dim = |dim: i64, r: i64, what: &str| -> Result<(), PayloadError> {
        if (-r..r).contains(&dim) {
            Ok(())
        } else {
            Err(invalid(format!("op {index} (`{name}`) {what} = {dim} is out of range for rank {r}")))
        }
    };
    match &node.op {
        Op::Embedding => need_index(1, "indices")?,
        Op::Rope { .. } => need_index(1, "position")?,
        Op::Attention { num_heads, num_kv_heads, .. } => {
            if *num_kv_heads == 0 || num_heads % num_kv_heads != 0 {
                return Err(invalid(format!("op {index} (`{name}`) num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")));
            }
            if node.inputs.len() == 4 {
                need_index(3, "position")?;
            }
        }
        Op::CacheUpdate { seq_dim } => {
            if !matches!(p.values[node.inputs[0] as usize].kind, ValueKind::State { .. }) {
                return Err(invalid(format!("op {index} (`{name}`) cache ({}) must be a state value", describe(p, node.inputs[0]))));
            }
            need_index(2, "position")?;
            need_dim(*seq_dim, rank(0), "seq_dim")?;
        }
        Op::IfZero { .. } => need_index(0, "flag")?,
        Op::Positions => {
            need_index(0, "position")?;
            let out = &p.values[node.outputs[0] as usize].meta;
            if !out.dtype.is_index() || out.dims.len() != 1 {
                return Err(invalid(format!("op {index} (`{name}`) output must be i32/i64 of rank 1, is {} of rank {}", out.dtype.name(), out.dims.len())));
            }
        }
        Op::Softmax { dim } | Op::Cat { dim } | Op::Slice { dim, .. } => need_dim(*dim, rank(0), "dim")?,
        Op::Transpose { dim0, dim1 } => {
            need_dim(*dim0, rank(0), "dim0")?;
            need_dim(*dim1, rank(0), "dim1")?;
        }
        Op::Permute { dims } if dims.len() as i64 != rank(0) => {
            return Err(invalid(format!("op {index} (`{name}`) permutes {} dims of a rank-{} input", dims.len(), rank(0))));
        }
        _ => {}
    }
    Ok(())
}
