//! `rbuild_kernels::xnnpack::SUPPORTED_NODES` checked exactly against the compiler: for every
//! node kind the payload reader knows and every datatype (all of `XnnDatatype`, not only those
//! ExecuTorch emits for activations), a minimal payload of that node is built (the helpers of
//! `xnnpack_graph`) and initialized through `XnnpackBackend::init`; the (kind, entry) pairs that
//! compile must be exactly the table's, in the table's order, and each of them must also run
//! (on zeros) once compiled.
//!
//! How a (kind, entry) pair becomes a payload (the conventions of `SUPPORTED_NODES`):
//! - `"D"`: every tensor operand of the node (inputs, output; a fully connected layer's filter
//!   too) is an activation of datatype `D`, 8-bit ones with one per-tensor quantization
//!   (scale 0.5; zero point 0, quint8 128).
//! - `"D+Ww"` (Conv2d, DepthwiseConv2d, ConvTranspose2d, FullyConnected): activations `D`, the
//!   filter a constant of datatype `W` in its canonical quantization ([`weight_quant`]), no bias.
//! - `"qdint8"`: the node's activation inputs are qdint8 values a `Convert` writes from fp32
//!   delegate inputs (per-row dynamic quantization, `num_nonbatch_dims` 1, or per-image, 3, for
//!   rank-4 values), its output fp32: dynamic quantization has no other valid payload, so these
//!   payloads have that Convert before the node under test.
//! - `"A->B"` (Convert only, which needs two datatypes): a delegate input of datatype `A`
//!   converted into a delegate output of datatype `B`. A Convert into qdint8 is only valid
//!   feeding its reader (its output must be internal), so it appears as the readers' `qdint8`
//!   entries and never as `"A->qdint8"`.
//! - Node parameters are small and valid (shapes below); a Clamp has the range [0, 6].
//!
//! `RBUILD_PRINT_SUPPORT=1` prints the table the compiler gives, as Rust source.

use std::collections::BTreeMap;

use rbuild_kernels::xnnpack::{compile_payload, XnnpackBackend, DEFAULT_ACTIVATION_LIMIT, SUPPORTED_NODES};
use rbuild_runtime::backend::{Backend, BackendInitContext};
use rbuild_runtime::backends::xnnpack::graph::{ConvParams, PoolParams};
use rbuild_runtime::backends::xnnpack::{NodeKind as K, NodeParams as P, Quant, Scales, XnnDatatype as D};

mod xnnpack_graph;
use xnnpack_graph::{conv_params, pc, pt, G};

/// Every `XnnDatatype`, in the table's order: the float activations, the 8-bit ones, dynamic
/// quantization, then the rest (weights, biases, packed forms).
const DATATYPES: [D; 14] = [D::Fp32, D::Fp16, D::Bf16, D::QInt8, D::QUInt8, D::QdInt8, D::Int32, D::QInt32, D::QcInt8, D::QcInt32, D::QcInt4, D::QbInt4, D::QpInt8, D::Pfp32];

/// The node kinds with a filter (the kinds whose entries may name a weight datatype).
const WEIGHTED: [K; 4] = [K::Conv2d, K::DepthwiseConv2d, K::ConvTranspose2d, K::FullyConnected];

/// Every node kind of the payload reader, in union-tag order.
fn node_kinds() -> Vec<K> {
    (1..=u8::MAX).map_while(K::from_tag).collect()
}

/// An activation's quantization: per-tensor for the quantized datatypes (their zero point's
/// middle of range), none for the others.
fn act_quant(d: D) -> Quant {
    match d {
        D::QUInt8 => pt(0.5, 128),
        D::QInt8 | D::QInt32 | D::QcInt8 | D::QcInt32 | D::QcInt4 | D::QbInt4 | D::QpInt8 => pt(0.5, 0),
        _ => Quant::None,
    }
}

/// A filter's canonical quantization: per-tensor symmetric qint8 (zero point 0) and quint8
/// (zero point 128), per-channel qcint8/qcint4/qcint32 along the output-channel dim, qbint4 in
/// blocks of 2 input channels (bf16 scales); none for the others.
fn weight_quant(w: D, out_channels: usize, in_channels: usize, channel_dim: i32) -> Quant {
    match w {
        D::QInt8 | D::QInt32 => pt(0.05, 0),
        D::QUInt8 => pt(0.05, 128),
        D::QcInt8 | D::QcInt4 | D::QcInt32 => pc(vec![0.05; out_channels], channel_dim),
        D::QbInt4 => Quant::PerChannelGroup {
            scales: Scales::InlineBf16(vec![half::bf16::from_f32(0.05).to_bits(); out_channels * in_channels / 2]),
            channel_dim,
            group_size: 2,
        },
        _ => Quant::None,
    }
}

/// A graph for one (kind, entry) pair, with the helpers the conventions above describe.
struct Case {
    g: G,
    act: D,
}

impl Case {
    /// An activation input (for qdint8: the Convert of an fp32 input).
    fn input(&mut self, dims: &[usize]) -> u32 {
        if self.act != D::QdInt8 {
            return self.g.input(self.act, dims, act_quant(self.act));
        }
        let x = self.g.input(D::Fp32, dims, Quant::None);
        let num_nonbatch_dims = if dims.len() == 4 { 3 } else { 1 };
        let q = self.g.internal(D::QdInt8, dims, Quant::PerTokenDynamic { num_nonbatch_dims });
        self.g.node(K::Convert, P::Unary { input: x, output: q, flags: 0 }, None);
        q
    }
    /// The node's output (fp32 for a dynamically quantized node).
    fn output(&mut self, dims: &[usize]) -> u32 {
        match self.act {
            D::QdInt8 => self.g.output(D::Fp32, dims, Quant::None),
            d => self.g.output(d, dims, act_quant(d)),
        }
    }
    /// A filter: an activation (`None`), or a constant of datatype `w` (`dims[channel_dim]`
    /// output channels; the last dim the input channels).
    fn filter(&mut self, w: Option<D>, dims: &[usize], channel_dim: usize) -> u32 {
        let Some(w) = w else { return self.input(dims) };
        let quant = weight_quant(w, dims[channel_dim], *dims.last().unwrap(), channel_dim as i32);
        // 4 bytes per element covers every datatype (the compiler takes what it needs).
        let bytes = vec![0x11; dims.iter().product::<usize>() * 4];
        self.g.constant(w, dims, quant, &bytes)
    }
}

fn pool(input: u32, output: u32) -> PoolParams {
    PoolParams {
        padding_top: 0,
        padding_right: 0,
        padding_bottom: 0,
        padding_left: 0,
        pooling_height: 2,
        pooling_width: 2,
        stride_height: 2,
        stride_width: 2,
        dilation_height: 1,
        dilation_width: 1,
        input,
        output,
        flags: 0,
    }
}

/// Convolutions: a 2×2 kernel on a 3×3 image (2 → 3 channels; depthwise 2 channels,
/// multiplier 1), transposed from a 2×2 image.
fn conv_case(c: &mut Case, kind: K, weight: Option<D>) {
    let (x, w, y, mut p): (u32, u32, u32, ConvParams);
    match kind {
        K::DepthwiseConv2d => {
            x = c.input(&[1, 3, 3, 2]);
            w = c.filter(weight, &[1, 2, 2, 2], 3);
            y = c.output(&[1, 2, 2, 2]);
            p = conv_params(2, 0, 1, 1, x, w, None, y);
            p.groups = 2;
        }
        K::ConvTranspose2d => {
            x = c.input(&[1, 2, 2, 2]);
            w = c.filter(weight, &[3, 2, 2, 2], 0);
            y = c.output(&[1, 3, 3, 3]);
            p = conv_params(2, 0, 2, 3, x, w, None, y);
        }
        _ => {
            x = c.input(&[1, 3, 3, 2]);
            w = c.filter(weight, &[3, 2, 2, 2], 0);
            y = c.output(&[1, 2, 2, 3]);
            p = conv_params(2, 0, 2, 3, x, w, None, y);
        }
    }
    c.g.node(kind, P::Conv(p), None);
}

/// The payload of `kind` on activations `act` (and filter `weight` for the weighted kinds).
fn node_case(kind: K, act: D, weight: Option<D>) -> G {
    let mut c = Case { g: G::new(), act };
    match kind {
        K::Conv2d | K::DepthwiseConv2d | K::ConvTranspose2d => conv_case(&mut c, kind, weight),
        K::FullyConnected => {
            let x = c.input(&[2, 4]);
            let w = c.filter(weight, &[3, 4], 0);
            let y = c.output(&[2, 3]);
            c.g.node(kind, P::FullyConnected { input: x, filter: w, bias: None, output: y, flags: 0 }, None);
        }
        K::Add | K::Subtract | K::Multiply | K::Div | K::Minimum | K::Maximum | K::PReLU => {
            let (a, b) = (c.input(&[2, 3]), c.input(&[2, 3]));
            let y = c.output(&[2, 3]);
            c.g.node(kind, P::Binary { input1: a, input2: b, output: y, flags: 0 }, None);
        }
        K::BatchMatrixMultiply => {
            let (a, b) = (c.input(&[1, 2, 3]), c.input(&[1, 3, 4]));
            let y = c.output(&[1, 2, 4]);
            c.g.node(kind, P::Binary { input1: a, input2: b, output: y, flags: 0 }, None);
        }
        K::GlobalAvgPooling2d => {
            let x = c.input(&[1, 3, 3, 2]);
            let y = c.output(&[1, 1, 1, 2]);
            c.g.node(kind, P::Unary { input: x, output: y, flags: 0 }, None);
        }
        K::AvgPooling2d | K::MaxPooling2d => {
            let x = c.input(&[1, 4, 4, 2]);
            let y = c.output(&[1, 2, 2, 2]);
            c.g.node(kind, P::Pool(pool(x, y)), None);
        }
        K::ArgMaxPooling2d => {
            let x = c.input(&[1, 4, 4, 2]);
            let y = c.output(&[1, 2, 2, 2]);
            let index = c.g.output(D::Int32, &[1, 2, 2, 2], Quant::None);
            c.g.node(kind, P::ArgMaxPool { pool: pool(x, y), output_index: index }, None);
        }
        K::Elu | K::LeakyReLU => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[2, 3]);
            c.g.node(kind, P::UnaryParam { param: 0.5, input: x, output: y }, None);
        }
        K::StaticTranspose => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[3, 2]);
            c.g.node(kind, P::Transpose { perm: vec![1, 0], input: x, output: y }, None);
        }
        K::StaticReshape => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[3, 2]);
            c.g.node(kind, P::Reshape { new_shape: vec![3, 2], input: x, output: y }, None);
        }
        K::StaticSlice => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[2, 2]);
            c.g.node(kind, P::Slice { offsets: vec![0, 1], sizes: vec![2, 2], input: x, output: y }, None);
        }
        K::StaticConstantPad => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[3, 4]);
            c.g.node(kind, P::ConstantPad { pre: vec![0, 1], post: vec![1, 0], value: 0.0, input: x, output: y }, None);
        }
        K::StaticResizeBilinear2D => {
            let x = c.input(&[1, 2, 2, 1]);
            let y = c.output(&[1, 4, 4, 1]);
            c.g.node(kind, P::ResizeBilinear { new_height: 4, new_width: 4, input: x, output: y, flags: 0 }, None);
        }
        K::Concatenate2 | K::Concatenate3 | K::Concatenate4 | K::Concatenate5 => {
            let n = match kind {
                K::Concatenate2 => 2,
                K::Concatenate3 => 3,
                K::Concatenate4 => 4,
                _ => 5,
            };
            let inputs: Vec<u32> = (0..n).map(|_| c.input(&[2, 1])).collect();
            let y = c.output(&[2, n]);
            c.g.node(kind, P::Concat { axis: 1, inputs, output: y }, None);
        }
        K::ScaledDotProductAttention => {
            let (q, k, v) = (c.input(&[1, 2, 2]), c.input(&[1, 2, 2]), c.input(&[1, 2, 2]));
            let (scale, mask) = (c.input(&[2]), c.input(&[2, 2]));
            let y = c.output(&[1, 2, 2]);
            c.g.node(kind, P::Sdpa { query: q, key: k, value: v, scale, mask, output: y }, None);
        }
        // The rest are `_XNNNode1x1` elementwise nodes (Convert is built by `convert_case`).
        _ => {
            let x = c.input(&[2, 3]);
            let y = c.output(&[2, 3]);
            let range = (kind == K::Clamp).then_some((0.0, 6.0));
            c.g.node(kind, P::Unary { input: x, output: y, flags: 0 }, range);
        }
    }
    c.g
}

/// `Convert` of a delegate input of datatype `from` into a delegate output of datatype `to`.
fn convert_case(from: D, to: D) -> G {
    let mut g = G::new();
    let x = g.input(from, &[2, 3], act_quant(from));
    let y = g.output(to, &[2, 3], act_quant(to));
    g.node(K::Convert, P::Unary { input: x, output: y, flags: 0 }, None);
    g
}

/// Every (entry, payload) the table could list for `kind`, in the table's order.
fn cases(kind: K) -> Vec<(String, G)> {
    let mut out = Vec::new();
    for &a in &DATATYPES {
        if kind == K::Convert {
            out.extend(DATATYPES.iter().map(|&b| (format!("{}->{}", a.name(), b.name()), convert_case(a, b))));
            continue;
        }
        out.push((a.name().to_string(), node_case(kind, a, None)));
        if WEIGHTED.contains(&kind) {
            out.extend(DATATYPES.iter().map(|&w| (format!("{}+{}w", a.name(), w.name()), node_case(kind, a, Some(w)))));
        }
    }
    out
}

/// What the backend does with a payload.
enum Outcome {
    /// `XnnpackBackend::init` takes it, and the compiled plan runs (on zeros).
    Runs,
    /// `init` refuses it, with this error.
    Refused(String),
    /// `init` takes it but the plan does not run (or `compile_payload` disagrees with `init`).
    Broken(String),
}

fn try_payload(bytes: &[u8]) -> Outcome {
    let none = |_: &str| None;
    let ctx = BackendInitContext { named_data: &none };
    if let Err(e) = XnnpackBackend.init(&ctx, bytes, &[]) {
        return Outcome::Refused(e);
    }
    let run = compile_payload(bytes, &none, DEFAULT_ACTIVATION_LIMIT).and_then(|mut plan| plan.run_in_place(1));
    match run {
        Ok(()) => Outcome::Runs,
        Err(e) => Outcome::Broken(e),
    }
}

fn as_source(rows: &[(String, Vec<String>)]) -> String {
    let mut s = String::from("pub const SUPPORTED_NODES: &[(&str, &[&str])] = &[\n");
    for (kind, entries) in rows {
        let list: Vec<String> = entries.iter().map(|e| format!("{e:?}")).collect();
        s += &format!("    ({kind:?}, &[{}]),\n", list.join(", "));
    }
    s + "];\n"
}

#[test]
fn supported_nodes_are_exactly_what_the_compiler_accepts() {
    let mut compiled: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    // Why each refused pair was refused ("Kind entry" → the init error).
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    let mut run_failures = Vec::new();
    let mut tried = 0;
    for kind in node_kinds() {
        for (entry, g) in cases(kind) {
            tried += 1;
            match try_payload(&g.payload()) {
                Outcome::Runs => compiled.entry(kind.name()).or_default().push(entry),
                Outcome::Refused(e) => {
                    refused.insert(format!("{} {entry}", kind.name()), e);
                }
                Outcome::Broken(e) => run_failures.push(format!("{} {entry}: {e}", kind.name())),
            }
        }
    }
    // BTreeMap order: rows sorted by node name.
    let got: Vec<(String, Vec<String>)> = compiled.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let table: Vec<(String, Vec<String>)> = SUPPORTED_NODES.iter().map(|(k, v)| (k.to_string(), v.iter().map(|e| e.to_string()).collect())).collect();
    if std::env::var_os("RBUILD_PRINT_SUPPORT").is_some() {
        println!("{}", as_source(&got));
    }
    eprintln!("{tried} (kind, entry) payloads tried; {} rows, {} entries compile", got.len(), got.iter().map(|r| r.1.len()).sum::<usize>());
    assert!(run_failures.is_empty(), "compiled but did not run:\n{}", run_failures.join("\n"));

    // The differences, the first of each side.
    let pairs = |rows: &[(String, Vec<String>)]| -> Vec<String> { rows.iter().flat_map(|(k, es)| es.iter().map(move |e| format!("{k} {e}"))).collect() };
    let (want, have) = (pairs(&got), pairs(&table));
    let missing: Vec<&String> = want.iter().filter(|p| !have.contains(p)).take(10).collect();
    let why = |p: &String| format!("{p} ({})", refused.get(p).map_or("not a payload this test builds", String::as_str));
    let extra: Vec<String> = have.iter().filter(|p| !want.contains(p)).take(10).map(why).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "SUPPORTED_NODES differs from the compiler.\ncompile but are not listed: {missing:?}\nlisted but do not compile: {extra:?}\n(RBUILD_PRINT_SUPPORT=1 prints the compiler's table)"
    );
    assert_eq!(table, got, "same pairs, another order: rows sorted by node name, entries in the order of `cases`");
}
