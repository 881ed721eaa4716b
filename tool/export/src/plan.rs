//! Memory planning: every non-constant tensor gets an offset in one arena (memory id 1).
//!
//! Lifetimes are [first definition, last use] in node order (graph inputs from the start,
//! graph outputs to the end; mutable state for the whole method). Placement is greedy by size: largest tensors first, each at the
//! lowest 16-aligned offset that no time-overlapping tensor already occupies.

use crate::graph::{Graph, Origin, ValueId};

/// ExecuTorch's planning alignment.
pub const ALIGNMENT: usize = 16;

#[derive(Clone, Debug, Default)]
pub struct MemoryPlan {
    /// Arena offset of each planned value (None: constant or unused).
    pub offsets: Vec<Option<usize>>,
    /// Arena size with reuse.
    pub arena_bytes: usize,
    /// What a bump allocator without reuse would need (the naive baseline).
    pub naive_bytes: usize,
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGNMENT) * ALIGNMENT
}

/// [start, end] node positions of each non-constant value that the graph touches.
pub fn lifetimes(g: &Graph) -> Vec<Option<(usize, usize)>> {
    let end = g.nodes.len();
    let mut life: Vec<Option<(usize, usize)>> = vec![None; g.values.len()];
    for &i in &g.inputs {
        life[i] = Some((0, 0));
    }
    for (k, n) in g.nodes.iter().enumerate() {
        for v in n.tensor_inputs() {
            if let Some((_, e)) = &mut life[v] {
                *e = (*e).max(k);
            } else if matches!(g.values[v].origin, Origin::State(_)) {
                life[v] = Some((0, end));
            }
        }
        for &o in &n.outputs {
            life[o] = Some((k, k));
        }
    }
    for &o in &g.outputs {
        if let Some((_, e)) = &mut life[o] {
            *e = end;
        }
    }
    for (v, l) in life.iter_mut().enumerate() {
        match g.values[v].origin {
            // Constants live in the program; run-time integers are values, not memory.
            Origin::Const(_) | Origin::SymInt => *l = None,
            // State must survive between executions: nothing else may ever share its bytes.
            _ => {}
        }
    }
    life
}

pub fn plan_memory(g: &Graph) -> MemoryPlan {
    let life = lifetimes(g);
    let mut items: Vec<(ValueId, usize, (usize, usize))> = life
        .iter()
        .enumerate()
        .filter_map(|(v, l)| l.map(|l| (v, align(g.max_bytes(v)), l)))
        .collect();
    let naive_bytes = items.iter().map(|i| i.1).sum();
    // Largest first; ties by definition order keep the result deterministic.
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.2 .0.cmp(&b.2 .0)).then(a.0.cmp(&b.0)));
    let mut placed: Vec<(usize, usize, (usize, usize))> = Vec::new(); // (offset, size, life)
    let mut offsets = vec![None; g.values.len()];
    let mut arena = 0;
    for (v, size, l) in items {
        if size == 0 {
            offsets[v] = Some(0);
            continue;
        }
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|(_, _, pl)| pl.0 <= l.1 && l.0 <= pl.1)
            .map(|&(o, s, _)| (o, o + s))
            .collect();
        busy.sort();
        let mut offset = 0;
        for (s, e) in busy {
            if offset + size <= s {
                break;
            }
            offset = offset.max(e);
        }
        placed.push((offset, size, l));
        offsets[v] = Some(offset);
        arena = arena.max(offset + size);
    }
    MemoryPlan { offsets, arena_bytes: arena, naive_bytes }
}
