//! What the delegate compilers (`tool/gpu`, `tool/xnnpack`) share: the placement report of a
//! method's ops, the partitions (runs of ops one delegate call replaces), the values a
//! partition hands back, and the rewrite that puts the delegate calls in the graph.

use crate::graph::{Arg, ConstData, Delegate, Graph, Node, ValueId, DELEGATE_CALL};

/// Where one op runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// In partition n (one delegate payload).
    Delegated(usize),
    /// On the CPU kernels, for the reason given (what `fallback "deny"` rejects).
    Cpu(String),
    /// A run-time scalar the CPU computes for the method's bookkeeping; no payload needs it.
    Scalar,
}

/// One row of the delegation report.
#[derive(Clone, Debug, PartialEq)]
pub struct OpPlacement {
    pub node: usize,
    pub op: String,
    /// The value the op writes (for the report).
    pub name: String,
    pub placement: Placement,
}

/// One delegated run: node indices in execution order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partition {
    pub nodes: Vec<usize>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partitioning {
    pub ops: Vec<OpPlacement>,
    pub partitions: Vec<Partition>,
}

impl Partitioning {
    /// Starts a new partition at node `i` unless `open` (the partition the previous op joined)
    /// is still open; returns its index. The callers close `open` when an op stays on the CPU.
    pub fn join(&mut self, open: &mut Option<usize>, i: usize) -> usize {
        let k = *open.get_or_insert_with(|| {
            self.partitions.push(Partition::default());
            self.partitions.len() - 1
        });
        self.partitions[k].nodes.push(i);
        k
    }
}

/// What delegation did to one method: the placement report's rows and the payload sizes.
#[derive(Clone, Debug)]
pub struct MethodReport {
    pub method: String,
    /// Where delegated ops run, for the summary ("the GPU", "XNNPACK").
    pub target: &'static str,
    pub partitioning: Partitioning,
    pub payload_bytes: Vec<usize>,
}

impl MethodReport {
    pub fn delegated_ops(&self) -> usize {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Delegated(_))).count()
    }

    /// Model ops left on the CPU, with their reasons (not the scalar bookkeeping).
    pub fn cpu_ops(&self) -> Vec<&OpPlacement> {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Cpu(_))).collect()
    }

    /// One line per method plus one per CPU op: what every build prints.
    pub fn summary(&self) -> String {
        let cpu = self.cpu_ops();
        let mut s = format!(
            "{}: {} op(s) on {} in {} subgraph(s), {} on the CPU",
            self.method,
            self.delegated_ops(),
            self.target,
            self.partitioning.partitions.len(),
            cpu.len()
        );
        for o in cpu {
            if let Placement::Cpu(reason) = &o.placement {
                s += &format!("\n  cpu: {} `{}`: {reason}", o.op, o.name);
            }
        }
        s
    }
}

/// The values partition `part` produces that anything outside it reads (the method's
/// outputs included), in first-read order: the delegate call's outputs.
pub fn partition_outputs(g: &Graph, part: &Partition) -> Vec<ValueId> {
    let inside: std::collections::HashSet<usize> = part.nodes.iter().copied().collect();
    let produced: std::collections::HashSet<ValueId> = part.nodes.iter().flat_map(|&i| g.nodes[i].outputs.iter().copied()).collect();
    let mut outputs = Vec::new();
    let reads_outside = g
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| !inside.contains(i))
        .flat_map(|(_, n)| n.tensor_inputs().collect::<Vec<_>>())
        .chain(g.outputs.iter().copied());
    for v in reads_outside {
        if produced.contains(&v) && !outputs.contains(&v) {
            outputs.push(v);
        }
    }
    outputs
}

/// One partition lowered to a payload: what the rewrite needs.
pub struct LoweredPartition {
    pub bytes: Vec<u8>,
    /// Graph values the delegate call takes, in payload input order.
    pub inputs: Vec<ValueId>,
    /// Graph values the delegate call writes, in payload output order.
    pub outputs: Vec<ValueId>,
    /// Constants the payload names, added to the program's named data.
    pub named_data: Vec<(String, ConstData)>,
}

/// Replaces each partition's nodes with one call of delegate `backend_id` at its last node's
/// place (partitions are convex runs, so the call sees all its inputs computed).
pub fn rewrite(g: &mut Graph, backend_id: &str, parts: &Partitioning, payloads: Vec<LoweredPartition>) {
    let mut owner = vec![None; g.nodes.len()];
    for (k, p) in parts.partitions.iter().enumerate() {
        for &n in &p.nodes {
            owner[n] = Some(k);
        }
    }
    let first = g.delegates.len();
    let mut calls: Vec<Option<Node>> = Vec::new();
    for (k, l) in payloads.into_iter().enumerate() {
        g.delegates.push(Delegate { id: backend_id.to_string(), processed: l.bytes, compile_specs: vec![] });
        for (key, data) in l.named_data {
            g.add_named_data(key, data);
        }
        let mut args = vec![Arg::Int((first + k) as i64)];
        args.extend(l.inputs.iter().map(|&v| Arg::Tensor(v)));
        calls.push(Some(Node { op: DELEGATE_CALL.into(), args, outputs: l.outputs }));
    }
    let old = std::mem::take(&mut g.nodes);
    for (i, n) in old.into_iter().enumerate() {
        match owner[i] {
            None => g.nodes.push(n),
            Some(k) if parts.partitions[k].nodes.last() == Some(&i) => {
                if let Some(call) = calls[k].take() {
                    g.nodes.push(call);
                }
            }
            Some(_) => {}
        }
    }
}

/// The export-IR ops a delegate compiler's `parse` has an arm for, sorted: every known op
/// ([`crate::ops::all`]) as a node whose tensor arguments and one output are float32
/// [1, 2, 2, 2] graph inputs (other arguments absent), kept unless `parse` answers with its
/// "no lowering for this op" error (`is_fallback`). The delegate crates check their
/// `LOWERED_OPS` lists (what `rbuild ops` prints) against it.
pub fn probe_lowered_ops(parse: impl Fn(&Graph, &Node) -> Result<(), String>, is_fallback: impl Fn(&str) -> bool) -> Vec<String> {
    use crate::graph::{Origin, TensorMeta};
    use rbuild_runtime::ScalarType;
    let mut found = Vec::new();
    for def in crate::ops::all() {
        let mut g = Graph::default();
        let value = |g: &mut Graph| {
            let k = g.inputs.len();
            let v = g.add_value(TensorMeta::fixed(ScalarType::Float, &[1, 2, 2, 2]), Origin::Input(k), "probe");
            g.inputs.push(v);
            v
        };
        let args = def
            .functional
            .inputs()
            .map(|a| match a.ty.as_str() {
                "Tensor" => Arg::Tensor(value(&mut g)),
                "Tensor[]" => Arg::Tensors(vec![value(&mut g), value(&mut g)]),
                _ => Arg::None,
            })
            .collect();
        let outputs = vec![value(&mut g)];
        let node = Node { op: def.functional.key(), args, outputs };
        match parse(&g, &node) {
            Err(e) if is_fallback(&e) => {}
            _ => found.push(def.functional.key()),
        }
    }
    found.sort();
    found
}
