//! Graph passes. Each takes `&mut Graph`, keeps the numbers the graph computes, and knows
//! nothing about which model it transforms.

pub mod calibrate;
pub mod const_fold;
pub mod dce;
pub mod decompose;
pub mod fold_bn;
pub mod fuse_int8;
pub mod noop;
pub mod prequantized;
pub mod quantize;
pub mod quantize_static;
pub mod to_out;

use std::collections::HashMap;
use std::fmt;

use crate::error::{ExportError, Result};
use crate::graph::{Arg, Graph, Node, Origin, ValueId};
use crate::shape;

/// What each pass of [`optimize`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    pub nodes_before: usize,
    /// Non-core nodes rewritten into core ops.
    pub decomposed: usize,
    /// No-op nodes removed.
    pub noops_removed: usize,
    /// Batch norms folded into the convolution before them.
    pub bn_folded: usize,
    /// Nodes evaluated once and replaced by constants.
    pub consts_folded: usize,
    /// Nodes removed because nothing used their outputs.
    pub dead_removed: usize,
    pub nodes_after: usize,
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "decompose: {} nodes rewritten", self.decomposed)?;
        writeln!(f, "noop: {} nodes removed", self.noops_removed)?;
        writeln!(f, "fold_bn: {} batch norms folded", self.bn_folded)?;
        writeln!(f, "const_fold: {} nodes folded", self.consts_folded)?;
        writeln!(f, "dce: {} dead nodes removed", self.dead_removed)?;
        write!(f, "nodes: {} -> {}", self.nodes_before, self.nodes_after)
    }
}

/// Choices a target makes about the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Rewrite `aten::linear` into Core ATen (`permute_copy` + `mm`/`addmm`). Off keeps
    /// `aten::linear.out`, which ExecuTorch also runs and our GEMV kernels take directly.
    pub decompose_linear: bool,
    /// Keep `aten::hardswish` whole for a delegate that has it as one op (XNNPACK); what the
    /// delegate does not take is decomposed afterwards ([`decompose::decompose`] again).
    pub keep_hardswish: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { decompose_linear: true, keep_hardswish: false }
    }
}

impl Options {
    /// The functional passes for the XNNPACK delegate: its Hardswish node replaces the
    /// four-op decomposition.
    pub fn for_xnnpack() -> Options {
        Options { keep_hardswish: true, ..Options::default() }
    }
}

/// The default pipeline, in order. The out-variant conversion stays last: the other passes
/// work on functional ops.
pub fn optimize(g: &mut Graph) -> Result<PassReport> {
    optimize_with(g, &Options::default())
}

/// [`optimize`] with explicit options.
pub fn optimize_with(g: &mut Graph, options: &Options) -> Result<PassReport> {
    let mut r = optimize_functional(g, options)?;
    to_out::to_out_variants(g)?;
    r.nodes_after = g.nodes.len();
    Ok(r)
}

/// The passes of [`optimize_with`] before the out-variant conversion: the graph stays
/// functional, which is what partitioners read.
pub fn optimize_functional(g: &mut Graph, options: &Options) -> Result<PassReport> {
    let mut r = PassReport { nodes_before: g.nodes.len(), ..Default::default() };
    r.decomposed = decompose::decompose(g, options)?;
    r.noops_removed = noop::remove_noops(g)?;
    r.bn_folded = fold_bn::fold_batch_norms(g)?;
    r.consts_folded = const_fold::fold_constants(g)?;
    r.dead_removed = dce::eliminate_dead_code(g);
    r.nodes_after = g.nodes.len();
    Ok(r)
}

/// How far [`optimize_int8`] takes a float graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int8Stage {
    /// ExecuTorch's reference representation (quantize/dequantize around float ops).
    Reference,
    /// The reference representation fused into rbuild's int8 kernels.
    Fused,
}

/// What [`optimize_int8`] did, beyond the float passes.
#[derive(Clone, Debug, Default)]
pub struct Int8Report {
    pub calibration_samples: usize,
    pub quant: quantize_static::StaticQuantReport,
    pub fuse: Option<fuse_int8::FuseReport>,
    /// The final int8 graph against the float one on the calibration samples.
    pub quality: Option<crate::int8_quality::Int8Quality>,
}

/// The float passes of [`optimize`], then calibration on `samples` (bytes per graph input, see
/// [`calibrate::calibrate`]), static int8 quantization and, for [`Int8Stage::Fused`], fusion.
pub fn optimize_int8(g: &mut Graph, samples: &[Vec<Vec<u8>>], stage: Int8Stage) -> Result<(PassReport, Int8Report)> {
    optimize_int8_with(g, samples, stage, &Int8Options::default())
}

/// Choices of static int8 quantization beyond the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Int8Options {
    /// Layers (weight-name prefixes such as `features.0`) kept in float32.
    pub keep_float: Vec<String>,
}

/// [`optimize_int8`] with explicit options.
pub fn optimize_int8_with(g: &mut Graph, samples: &[Vec<Vec<u8>>], stage: Int8Stage, options: &Int8Options) -> Result<(PassReport, Int8Report)> {
    let mut q = quantize_with_float_twin(g, samples, options)?;
    if stage == Int8Stage::Fused {
        q.report.fuse = Some(fuse_int8::fuse_int8(g)?);
    }
    let (mut r, report) = q.measured(g, samples)?;
    r.dead_removed += dce::eliminate_dead_code(g);
    to_out::to_out_variants(g)?;
    r.nodes_after = g.nodes.len();
    Ok((r, report))
}

/// The float passes that run before calibration (decomposition, BN folding, constant folding),
/// leaving functional ops: the graph [`calibrate::calibrate`] observes.
pub fn prepare_for_quantization(g: &mut Graph) -> Result<PassReport> {
    let mut r = PassReport { nodes_before: g.nodes.len(), ..Default::default() };
    r.decomposed = decompose::decompose(g, &Options::default())?;
    r.noops_removed = noop::remove_noops(g)?;
    r.bn_folded = fold_bn::fold_batch_norms(g)?;
    r.consts_folded = const_fold::fold_constants(g)?;
    r.dead_removed = dce::eliminate_dead_code(g);
    Ok(r)
}

/// [`optimize_int8`] up to fusion, without the out-variant step, also returning the fused
/// patterns by output value: a delegate partitioner lowers them its own way and rewrites this
/// functional graph, then [`to_out::to_out_variants`] finishes it.
pub fn optimize_int8_for_delegation(
    g: &mut Graph,
    samples: &[Vec<Vec<u8>>],
) -> Result<(Int8Report, std::collections::BTreeMap<ValueId, fuse_int8::Matched>)> {
    let mut q = quantize_with_float_twin(g, samples, &Int8Options::default())?;
    let (fused, matches) = fuse_int8::fuse_int8_matched(g)?;
    q.report.fuse = Some(fused);
    let (_, report) = q.measured(g, samples)?;
    dce::eliminate_dead_code(g);
    Ok((report, matches))
}

/// The first half of [`optimize_int8`]: float passes, calibration and the reference
/// representation, still in functional ops (fuse with [`fuse_int8::fuse_int8`], then convert
/// with [`to_out::to_out_variants`]). Fusion keeps value ids: a fused op writes the value its
/// quantize wrote and reads the int8 values the reference's dequantizes read, so the two graphs
/// can be compared op by op.
pub fn quantize_reference(g: &mut Graph, samples: &[Vec<Vec<u8>>]) -> Result<(PassReport, Int8Report)> {
    quantize_with_float_twin(g, samples, &Int8Options::default())?.measured(g, samples)
}

/// Ranks the activations static int8 quantization would quantize in `g` (a float model graph)
/// by the output SQNR each costs alone, worst first: (label, dB). The label names the value and
/// the layer that computes it (its first constant input, e.g. a convolution's weight).
pub fn int8_sensitivity(g: &Graph, samples: &[Vec<Vec<u8>>], options: &Int8Options) -> Result<Vec<(String, f64)>> {
    let mut g = g.clone();
    let Quantized { report, float_graph, float_outputs, .. } = quantize_with_float_twin(&mut g, samples, options)?;
    let rows = crate::int8_quality::sensitivity(&float_graph, samples, &float_outputs, &report.quant.activations)?;
    let producer = |v: ValueId| float_graph.nodes.iter().find(|n| n.outputs.contains(&v));
    // An activation's layer: the op itself, or what feeds it when it is a relu/hardtanh/clamp.
    let layer = |v: ValueId| -> String {
        let mut at = producer(v);
        for _ in 0..2 {
            let Some(n) = at else { return "program input".into() };
            if let Some(c) = n.tensor_inputs().find(|&i| float_graph.constant(i).is_some()) {
                return format!("{} of {}", n.op, quantize_static::layer_name(&float_graph.values[c].name));
            }
            match n.tensor_inputs().next() {
                Some(i) if n.tensor_inputs().count() == 1 => at = producer(i),
                _ => return n.op.clone(),
            }
        }
        at.map_or_else(String::new, |n| n.op.clone())
    };
    Ok(rows.into_iter().map(|(v, db)| (format!("{} ({})", float_graph.values[v].name, layer(v)), db)).collect())
}

/// [`quantize_reference`]'s work, keeping the calibrated float graph and its outputs on the
/// samples (what the int8 quality report compares against).
struct Quantized {
    pass: PassReport,
    report: Int8Report,
    float_graph: Graph,
    float_outputs: Vec<Vec<Vec<u8>>>,
}

impl Quantized {
    /// The reports, with `int8_graph` (this quantization, maybe fused since) measured against
    /// the float graph on the samples.
    fn measured(self, int8_graph: &Graph, samples: &[Vec<Vec<u8>>]) -> Result<(PassReport, Int8Report)> {
        let Quantized { pass, mut report, float_graph, float_outputs } = self;
        report.quality = Some(crate::int8_quality::measure(&float_graph, int8_graph, samples, &float_outputs, &report.quant.activations)?);
        Ok((pass, report))
    }
}

fn quantize_with_float_twin(g: &mut Graph, samples: &[Vec<Vec<u8>>], options: &Int8Options) -> Result<Quantized> {
    let mut pass = prepare_for_quantization(g)?;
    let ranges = calibrate::calibrate(g, samples)?;
    let float_graph = g.clone();
    let quant = quantize_static::quantize_static(g, &ranges, &options.keep_float)?;
    pass.nodes_after = g.nodes.len();
    let report = Int8Report { calibration_samples: ranges.samples, quant, fuse: None, quality: None };
    Ok(Quantized { pass, report, float_graph, float_outputs: ranges.outputs })
}

/// Appends `op(args)` with outputs from shape inference; returns the new output values.
pub(crate) fn append(g: &mut Graph, op: &str, args: Vec<Arg>) -> Result<Vec<ValueId>> {
    let shape::Inferred { metas, new_syms } = shape::infer_with_syms(g, op, &args, None)?;
    g.syms.extend(new_syms);
    let short = op.rsplit("::").next().unwrap_or(op);
    let outputs: Vec<ValueId> = metas
        .into_iter()
        .map(|m| {
            let name = format!("{short}_{}", g.values.len());
            let origin = if crate::ops::returns_int(op) { Origin::SymInt } else { Origin::Computed };
            g.add_value(m, origin, name)
        })
        .collect();
    g.nodes.push(Node { op: op.to_string(), args, outputs: outputs.clone() });
    Ok(outputs)
}

/// `append` for single-output ops.
pub(crate) fn append1(g: &mut Graph, op: &str, args: Vec<Arg>) -> Result<ValueId> {
    append(g, op, args)?.into_iter().next().ok_or_else(|| ExportError::Invalid(format!("{op} has no output")))
}

/// Appends `op(args)` writing into existing values (a rewrite's last node keeps the replaced
/// node's outputs, so uses and graph outputs need no renaming). Inference must agree with them.
pub(crate) fn append_into(g: &mut Graph, op: &str, args: Vec<Arg>, outputs: &[ValueId]) -> Result<()> {
    let metas = shape::infer(g, op, &args)?;
    let same = metas.len() == outputs.len() && metas.iter().zip(outputs).all(|(m, &o)| *m == g.values[o].meta);
    if !same {
        let old: Vec<_> = outputs.iter().map(|&o| &g.values[o].meta).collect();
        return Err(ExportError::Invalid(format!("rewrite into {op} gives {metas:?}, the replaced node gave {old:?}")));
    }
    g.nodes.push(Node { op: op.to_string(), args, outputs: outputs.to_vec() });
    Ok(())
}

/// Pending "use `new` wherever `old` was used" substitutions, applied in one sweep.
#[derive(Default)]
pub(crate) struct Renames(HashMap<ValueId, ValueId>);

impl Renames {
    pub(crate) fn resolve(&self, mut v: ValueId) -> ValueId {
        while let Some(&n) = self.0.get(&v) {
            v = n;
        }
        v
    }

    pub(crate) fn add(&mut self, old: ValueId, new: ValueId) {
        let new = self.resolve(new);
        if new != old {
            self.0.insert(old, new);
        }
    }

    /// Rewrites node arguments and graph outputs.
    pub(crate) fn apply(&self, g: &mut Graph) {
        if self.0.is_empty() {
            return;
        }
        for n in &mut g.nodes {
            for a in &mut n.args {
                a.map_values(|v| self.resolve(v));
            }
        }
        for i in 0..g.outputs.len() {
            g.outputs[i] = self.resolve(g.outputs[i]);
        }
    }
}

// Argument readers: a malformed node is an error naming the op, never a panic.

fn bad_arg(n: &Node, i: usize, want: &str) -> ExportError {
    ExportError::Invalid(format!("{}: argument {i} must be {want}, got {:?}", n.op, n.args.get(i)))
}

pub(crate) fn tensor_arg(n: &Node, i: usize) -> Result<ValueId> {
    match n.args.get(i) {
        Some(Arg::Tensor(v)) => Ok(*v),
        _ => Err(bad_arg(n, i, "a tensor")),
    }
}

pub(crate) fn opt_tensor_arg(n: &Node, i: usize) -> Result<Option<ValueId>> {
    match n.args.get(i) {
        Some(Arg::Tensor(v)) => Ok(Some(*v)),
        Some(Arg::None) | None => Ok(None),
        _ => Err(bad_arg(n, i, "a tensor or None")),
    }
}

pub(crate) fn ints_arg(n: &Node, i: usize) -> Result<&[i64]> {
    match n.args.get(i) {
        Some(Arg::Ints(v)) => Ok(v),
        _ => Err(bad_arg(n, i, "an int list")),
    }
}

pub(crate) fn int_arg(n: &Node, i: usize) -> Result<i64> {
    match n.args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        _ => Err(bad_arg(n, i, "an int")),
    }
}

pub(crate) fn bool_arg(n: &Node, i: usize) -> Result<bool> {
    match n.args.get(i) {
        Some(Arg::Bool(b)) => Ok(*b),
        _ => Err(bad_arg(n, i, "a bool")),
    }
}

pub(crate) fn float_arg(n: &Node, i: usize) -> Result<f64> {
    match n.args.get(i) {
        Some(Arg::Float(f)) => Ok(*f),
        Some(Arg::Scalar(rbuild_runtime::Scalar::Double(f))) => Ok(*f),
        _ => Err(bad_arg(n, i, "a float")),
    }
}

/// Little-endian f32 bytes → values.
pub(crate) fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
