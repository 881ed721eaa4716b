//! The `RbuildGpuBackend` payload: a Whisper-decoder-like block round-trips through the writer
//! and reader, and every class of malformed payload is rejected with a clear error (never a panic).

use rbuild_runtime::backends::gpu::payload::*;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;

const D: u64 = 8;
const FFN: u64 = 32;
const VOCAB: u64 = 64;
const MAX_SEQ: u64 = 448;

struct Builder {
    p: Payload,
}

impl Builder {
    fn value(&mut self, name: &str, dtype: DType, dims: &[Dim], kind: ValueKind) -> ValueId {
        self.p.values.push(ValueDef { name: name.into(), meta: TensorMeta { dtype, dims: dims.to_vec(), quant: None }, kind });
        (self.p.values.len() - 1) as ValueId
    }
    fn constant(&mut self, name: &str, dims: &[u64]) -> ValueId {
        let dims: Vec<Dim> = dims.iter().map(|&d| Dim::Fixed(d)).collect();
        self.value(name, DType::F32, &dims, ValueKind::Constant { key: format!("decoder.{name}") })
    }
    fn op(&mut self, op: Op, inputs: &[ValueId], out: Option<(&str, DType, &[Dim])>) -> ValueId {
        let outputs = match out {
            Some((name, dtype, dims)) => vec![self.value(name, dtype, dims, ValueKind::Activation)],
            None => vec![],
        };
        self.p.ops.push(OpNode { op, inputs: inputs.to_vec(), outputs: outputs.clone() });
        outputs.first().copied().unwrap_or(u32::MAX)
    }
}

/// Embedding, layer norm, q/k/v projections (q int8 weight-only), cache updates, cached causal
/// attention, output projection, residual add, GELU MLP, final norm and a tied LM head.
fn whisper_block() -> Payload {
    use Dim::Fixed;
    let mut b = Builder { p: Payload::default() };
    b.p.symbols.push(Symbol { name: "seq".into(), min: 1, max: MAX_SEQ });
    let seq = Dim::Symbol(0);
    let tokens = b.value("tokens", DType::I64, &[Fixed(1), seq], ValueKind::Input);
    let position = b.value("position", DType::I64, &[], ValueKind::Input);
    b.p.inputs = vec![tokens, position];
    let embed = b.constant("embed_tokens.weight", &[VOCAB, D]);
    let ln1 = (b.constant("ln1.weight", &[D]), b.constant("ln1.bias", &[D]));
    let wq_scales = b.value("wq.scales", DType::F16, &[Fixed(D), Fixed(1)], ValueKind::Constant { key: "decoder.wq.scales".into() });
    let wq = b.value("wq", DType::QInt8Grouped, &[Fixed(D), Fixed(D)], ValueKind::Constant { key: "decoder.wq.weight".into() });
    b.p.values[wq as usize].meta.quant = Some(GroupQuant { group_size: 8, scales: wq_scales });
    let (wk, bk, wv, wo) = (b.constant("wk", &[D, D]), b.constant("bk", &[D]), b.constant("wv", &[D, D]), b.constant("wo", &[D, D]));
    let ln2 = (b.constant("ln2.weight", &[D]), b.constant("ln2.bias", &[D]));
    let (fc1, fc1_bias, fc2) = (b.constant("fc1", &[FFN, D]), b.constant("fc1.bias", &[FFN]), b.constant("fc2", &[D, FFN]));
    let ln_f = (b.constant("ln_f.weight", &[D]), b.constant("ln_f.bias", &[D]));
    let cache_dims = [Fixed(1), Fixed(MAX_SEQ), Fixed(2), Fixed(4)];
    let k_cache = b.value("k_cache", DType::F16, &cache_dims, ValueKind::State { init: StateInit::Zeros });
    let v_cache = b.value("v_cache", DType::F16, &cache_dims, ValueKind::State { init: StateInit::Named("decoder.v_cache.init".into()) });

    let hidden = [Fixed(1), seq, Fixed(D)];
    let heads = [Fixed(1), seq, Fixed(2), Fixed(4)];
    let f32_ = DType::F32;
    let x0 = b.op(Op::Embedding, &[embed, tokens], Some(("x0", f32_, &hidden)));
    let h1 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[x0, ln1.0, ln1.1], Some(("h1", f32_, &hidden)));
    let q = b.op(Op::Linear { weight_transposed: false }, &[h1, wq], Some(("q", f32_, &hidden)));
    let k = b.op(Op::Linear { weight_transposed: false }, &[h1, wk, bk], Some(("k", f32_, &hidden)));
    let v = b.op(Op::Linear { weight_transposed: true }, &[h1, wv], Some(("v", f32_, &hidden)));
    let q4 = b.op(Op::Reshape, &[q], Some(("q4", f32_, &heads)));
    let k4 = b.op(Op::Reshape, &[k], Some(("k4", f32_, &heads)));
    let v4 = b.op(Op::Reshape, &[v], Some(("v4", f32_, &heads)));
    let q4 = b.op(Op::Rope { theta: 10000.0, head_dim: 4, interleaved: false }, &[q4, position], Some(("q4r", f32_, &heads)));
    let k4h = b.op(Op::Cast, &[k4], Some(("k4h", DType::F16, &heads)));
    let v4h = b.op(Op::Cast, &[v4], Some(("v4h", DType::F16, &heads)));
    b.op(Op::CacheUpdate { seq_dim: 1 }, &[k_cache, k4h, position], None);
    b.op(Op::CacheUpdate { seq_dim: 1 }, &[v_cache, v4h, position], None);
    let attn = Op::Attention { causal: true, scale: 0.5, num_heads: 2, num_kv_heads: 2 };
    let a4 = b.op(attn, &[q4, k_cache, v_cache, position], Some(("a4", f32_, &heads)));
    let a = b.op(Op::Reshape, &[a4], Some(("a", f32_, &hidden)));
    let o = b.op(Op::Linear { weight_transposed: false }, &[a, wo], Some(("o", f32_, &hidden)));
    let r1 = b.op(Op::Binary(BinaryOp::Add), &[x0, o], Some(("r1", f32_, &hidden)));
    let h2 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[r1, ln2.0, ln2.1], Some(("h2", f32_, &hidden)));
    let ffn = [Fixed(1), seq, Fixed(FFN)];
    let f1 = b.op(Op::Linear { weight_transposed: false }, &[h2, fc1, fc1_bias], Some(("f1", f32_, &ffn)));
    let g = b.op(Op::Gelu { approximation: GeluApproximation::Erf }, &[f1], Some(("g", f32_, &ffn)));
    let f2 = b.op(Op::Linear { weight_transposed: false }, &[g, fc2], Some(("f2", f32_, &hidden)));
    let r2 = b.op(Op::Binary(BinaryOp::Add), &[r1, f2], Some(("r2", f32_, &hidden)));
    let h3 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[r2, ln_f.0, ln_f.1], Some(("h3", f32_, &hidden)));
    let logits = b.op(Op::Linear { weight_transposed: false }, &[h3, embed], Some(("logits", f32_, &[Fixed(1), seq, Fixed(VOCAB)])));
    b.p.outputs = vec![logits];
    b.p
}

/// `x [4] f32` input -> softmax(dim -1) -> `y`.
fn softmax_payload() -> Payload {
    let mut b = Builder { p: Payload::default() };
    let x = b.value("x", DType::F32, &[Dim::Fixed(4)], ValueKind::Input);
    b.p.inputs = vec![x];
    let y = b.op(Op::Softmax { dim: -1 }, &[x], Some(("y", DType::F32, &[Dim::Fixed(4)])));
    b.p.outputs = vec![y];
    b.p
}

/// Byte offset of section `index` (strings, symbols, values, io, ops).
fn section(bytes: &[u8], index: usize) -> usize {
    let at = HEADER_LEN + index * 8;
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn rejected(bytes: &[u8], kind: ErrorKind, needle: &str) -> PayloadError {
    let err = Payload::from_bytes(bytes).expect_err("malformed payload must be rejected");
    assert_eq!(err.kind, kind, "{err}");
    assert!(err.to_string().contains(needle), "`{err}` should mention `{needle}`");
    err
}

#[test]
fn backend_id_is_rbuilds_own() {
    assert_eq!(RBUILD_GPU_BACKEND_ID, "RbuildGpuBackend");
}

#[test]
fn whisper_block_round_trips() {
    let p = whisper_block();
    p.validate().unwrap();
    let bytes = p.to_bytes().unwrap();
    assert_eq!(&bytes[..4], b"RGPU");
    let back = Payload::from_bytes(&bytes).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.to_bytes().unwrap(), bytes, "writing is deterministic");
    // Weights are referenced by key, never copied: the payload stays small.
    assert!(bytes.len() < 4096, "{} bytes", bytes.len());
    assert!(bytes.windows(b"decoder.wq.weight".len()).any(|w| w == b"decoder.wq.weight"));
}

#[test]
fn trailing_padding_is_ignored_and_minor_versions_are_accepted() {
    let mut bytes = whisper_block().to_bytes().unwrap();
    bytes[6] = 7; // minor version 1.7: same sections, maybe more after them
    bytes.extend_from_slice(&[0; 13]);
    assert_eq!(Payload::from_bytes(&bytes).unwrap(), whisper_block());
}

#[test]
fn every_op_round_trips_through_its_attributes() {
    let ops = [
        Op::Linear { weight_transposed: true },
        Op::MatMul,
        Op::Conv1d { stride: 2, padding: 1, dilation: 1, groups: 1 },
        Op::LayerNorm { eps: 1e-6, affine: false },
        Op::RmsNorm { eps: 1e-6 },
        Op::Gelu { approximation: GeluApproximation::Tanh },
        Op::Silu,
        Op::Softmax { dim: -1 },
        Op::Attention { causal: false, scale: 0.125, num_heads: 32, num_kv_heads: 8 },
        Op::Binary(BinaryOp::Div),
        Op::Unary(UnaryOp::Rsqrt),
        Op::Embedding,
        Op::Rope { theta: 500000.0, head_dim: 128, interleaved: true },
        Op::Reshape,
        Op::Permute { dims: vec![0, 2, 1, 3] },
        Op::Transpose { dim0: 1, dim1: 2 },
        Op::Slice { dim: 1, start: 0, end: i64::MAX, step: 2 },
        Op::Cat { dim: 0 },
        Op::Cast,
        Op::CacheUpdate { seq_dim: 2 },
        Op::IfZero { count: 3 },
        Op::Positions,
    ];
    let mut codes: Vec<u16> = ops.iter().map(Op::code).collect();
    codes.dedup();
    assert_eq!(codes.len(), ops.len(), "one code per op");
    for op in ops {
        assert_eq!(Op::decode(op.code(), &op.attrs()).unwrap(), op);
    }
    assert!(Op::decode(6, &[Attr::Int(2)]).unwrap_err().contains("approximation"));
    assert!(Op::decode(3, &[Attr::Int(0), Attr::Int(0), Attr::Int(1), Attr::Int(1)]).unwrap_err().contains("stride"));
    assert!(Op::decode(4, &[Attr::Float(f32::NAN), Attr::Bool(true)]).unwrap_err().contains("not finite"));
    assert!(Op::decode(15, &[Attr::Ints(vec![0, 0])]).unwrap_err().contains("permutation"));
    assert!(Op::decode(17, &[Attr::Int(0), Attr::Int(0), Attr::Int(1), Attr::Int(0)]).unwrap_err().contains("step"));
    assert!(Op::decode(21, &[Attr::Int(0)]).unwrap_err().contains("count"));
}

/// A projection into state guarded by `if_zero`, then a read of the state.
fn guarded_payload() -> Payload {
    let v = |name: &str, dtype: DType, dims: Vec<Dim>, kind: ValueKind| ValueDef { name: name.into(), meta: TensorMeta { dtype, dims, quant: None }, kind };
    Payload {
        values: vec![
            v("flag", DType::I64, vec![Dim::Fixed(1)], ValueKind::Input),
            v("x", DType::F32, vec![Dim::Fixed(4)], ValueKind::Input),
            v("cache", DType::F32, vec![Dim::Fixed(4)], ValueKind::State { init: StateInit::Zeros }),
            v("e", DType::F32, vec![Dim::Fixed(4)], ValueKind::Activation),
            v("y", DType::F32, vec![Dim::Fixed(4)], ValueKind::Activation),
            v("ids", DType::I64, vec![Dim::Fixed(4)], ValueKind::Activation),
        ],
        inputs: vec![0, 1],
        outputs: vec![4],
        ops: vec![
            OpNode { op: Op::IfZero { count: 2 }, inputs: vec![0], outputs: vec![] },
            OpNode { op: Op::Unary(UnaryOp::Exp), inputs: vec![1], outputs: vec![3] },
            OpNode { op: Op::CacheUpdate { seq_dim: 0 }, inputs: vec![2, 3, 0], outputs: vec![] },
            OpNode { op: Op::Binary(BinaryOp::Add), inputs: vec![2, 1], outputs: vec![4] },
        ],
        ..Default::default()
    }
}

/// `if_zero` ranges: in bounds, not nested, and what they produce stays inside them.
#[test]
fn if_zero_ranges_keep_their_values_inside() {
    let base = guarded_payload;
    base().validate().expect("a guarded projection into state is valid");
    let check = |edit: &dyn Fn(&mut Payload), needle: &str| {
        let mut p = base();
        edit(&mut p);
        let err = p.validate().expect_err(needle);
        assert!(err.message.contains(needle), "`{err}` should mention `{needle}`");
    };
    check(&|p| p.ops[3].inputs = vec![3, 1], "produced inside the `if_zero` range of op 0, from outside it");
    check(&|p| p.ops[0].op = Op::IfZero { count: 4 }, "guards 4 op(s), only 3 follow it");
    check(&|p| p.ops[1] = OpNode { op: Op::IfZero { count: 1 }, inputs: vec![0], outputs: vec![] }, "ranges do not nest");
    check(&|p| { p.ops[0].op = Op::IfZero { count: 3 }; }, "delegate output 0");
    check(&|p| p.ops[0].inputs = vec![1], "flag");
    check(&|p| p.ops[3] = OpNode { op: Op::Positions, inputs: vec![0], outputs: vec![4] }, "output must be i32/i64 of rank 1");
}

#[test]
fn dtype_codes_are_explicit_and_unknown_ones_rejected() {
    for d in DType::ALL {
        assert_eq!(DType::from_code(d.code()), Some(d));
    }
    assert_eq!(DType::from_code(0), None);
    assert_eq!(DType::F32.code(), 1);
    assert_eq!(DType::QInt4Grouped.code(), 17);
    let mut bytes = whisper_block().to_bytes().unwrap();
    let dtype_at = section(&bytes, 2) + 4 + 4;
    bytes[dtype_at] = 99;
    let err = rejected(&bytes, ErrorKind::UnknownCode, "unknown dtype code 99");
    assert_eq!(err.offset, Some(dtype_at));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = whisper_block().to_bytes().unwrap();
    for n in 0..bytes.len() {
        assert!(Payload::from_bytes(&bytes[..n]).is_err(), "prefix of {n} bytes was accepted");
        // Also with the declared length shrunk to match, so section bounds are what fails.
        let mut cut = bytes[..n].to_vec();
        if n >= 12 {
            put_u32(&mut cut, 8, n as u32);
        }
        assert!(Payload::from_bytes(&cut).is_err(), "prefix of {n} bytes with a matching length was accepted");
    }
    rejected(&bytes[..100], ErrorKind::Truncated, "declares");
    for declared in 0..HEADER_LEN as u32 {
        let mut short = bytes.clone();
        put_u32(&mut short, 8, declared);
        rejected(&short, ErrorKind::Truncated, "less than the 16-byte header");
    }
}

#[test]
fn bad_magic_and_unknown_major_version() {
    let bytes = whisper_block().to_bytes().unwrap();
    let mut bad = bytes.clone();
    bad[0] = b'X';
    rejected(&bad, ErrorKind::BadMagic, "RGPU");
    rejected(b"PTE\0", ErrorKind::BadMagic, "magic");
    let mut v2 = bytes.clone();
    v2[4] = 2;
    rejected(&v2, ErrorKind::UnsupportedVersion, "version 2.0 is not supported");
}

#[test]
fn hostile_counts_do_not_allocate() {
    let bytes = whisper_block().to_bytes().unwrap();
    let mut sections = bytes.clone();
    put_u32(&mut sections, 12, u32::MAX);
    rejected(&sections, ErrorKind::Truncated, "section count");
    for (index, field) in [(0, "string count"), (1, "symbol count"), (2, "value count"), (4, "op count")] {
        let mut bad = bytes.clone();
        put_u32(&mut bad, section(&bytes, index), u32::MAX);
        rejected(&bad, ErrorKind::Truncated, field);
    }
}

#[test]
fn out_of_range_indices_and_offsets() {
    let bytes = whisper_block().to_bytes().unwrap();
    let mut bad = bytes.clone();
    put_u32(&mut bad, section(&bytes, 2) + 4, 9999); // first value's name
    rejected(&bad, ErrorKind::OutOfRange, "value name is string 9999");

    let mut bad = bytes.clone();
    put_u32(&mut bad, section(&bytes, 3) + 4, 9999); // first delegate input
    rejected(&bad, ErrorKind::OutOfRange, "input is value 9999");

    let mut bad = bytes.clone();
    put_u32(&mut bad, section(&bytes, 4) + 4 + 2 + 1, 9999); // first op's first input
    rejected(&bad, ErrorKind::OutOfRange, "op 0 (`embedding`) input is value 9999");

    let mut bad = bytes.clone();
    put_u32(&mut bad, HEADER_LEN + 4 * 8, bytes.len() as u32); // ops section starts at the end
    rejected(&bad, ErrorKind::OutOfRange, "section 4 (`ops`)");

    let mut bad = bytes.clone();
    put_u32(&mut bad, HEADER_LEN + 8 + 4, u32::MAX); // symbols length overflows
    rejected(&bad, ErrorKind::OutOfRange, "section 1 (`symbols`)");

    let mut bad = bytes.clone();
    put_u32(&mut bad, HEADER_LEN, 0); // strings section overlapping the header
    rejected(&bad, ErrorKind::OutOfRange, "section 0 (`strings`)");
}

#[test]
fn unknown_op_code() {
    let mut bytes = whisper_block().to_bytes().unwrap();
    let at = section(&bytes, 4) + 4;
    bytes[at..at + 2].copy_from_slice(&999u16.to_le_bytes());
    let err = rejected(&bytes, ErrorKind::UnknownCode, "op 0 has unknown op code 999");
    assert_eq!(err.offset, Some(at));
}

#[test]
fn wrong_attribute_count_kind_or_value() {
    let bytes = softmax_payload().to_bytes().unwrap();
    assert_eq!(Payload::from_bytes(&bytes).unwrap(), softmax_payload());
    let ops = section(&bytes, 4);
    let (count_at, kind_at) = (ops + 16, ops + 17);
    assert_eq!((bytes[count_at], bytes[kind_at]), (1, AttrKind::Int as u8));

    let mut bad = bytes.clone();
    bad[count_at] = 0;
    rejected(&bad, ErrorKind::BadAttribute, "`softmax` takes 1 attribute(s), found 0");
    let mut bad = bytes.clone();
    bad[kind_at] = AttrKind::Float as u8;
    rejected(&bad, ErrorKind::BadAttribute, "attribute 0 (`dim`) must be int, found float");
    let mut bad = bytes.clone();
    bad[kind_at] = 9;
    rejected(&bad, ErrorKind::UnknownCode, "unknown attribute kind 9");
    let mut bad = bytes.clone();
    bad[kind_at + 1..kind_at + 9].copy_from_slice(&5i64.to_le_bytes());
    rejected(&bad, ErrorKind::Invalid, "dim = 5 is out of range for rank 1");
}

#[test]
fn undefined_symbol() {
    let mut bytes = whisper_block().to_bytes().unwrap();
    // tokens [Fixed(1), Symbol(0)]: count 4, name 4, dtype 1, rank 1, dim tag 1 + 8, tag 1, value.
    let at = section(&bytes, 2) + 4 + 4 + 1 + 1 + 9 + 1;
    bytes[at] = 5;
    rejected(&bytes, ErrorKind::OutOfRange, "symbol 5, which is not defined");

    let mut p = whisper_block();
    p.symbols.clear();
    let err = p.to_bytes().unwrap_err();
    assert!(err.message.contains("symbol 0, which is not defined"), "{err}");
}

#[test]
fn output_never_produced() {
    let mut bytes = whisper_block().to_bytes().unwrap();
    // io: input count, 2 inputs, output count, first output -> value 0 (an input).
    let at = section(&bytes, 3) + 4 + 8 + 4;
    put_u32(&mut bytes, at, 0);
    rejected(&bytes, ErrorKind::Invalid, "delegate output 0 is value 0 `tokens`, which no op produces");

    let mut p = whisper_block();
    p.values.push(ValueDef {
        name: "orphan".into(),
        meta: TensorMeta { dtype: DType::F32, dims: vec![], quant: None },
        kind: ValueKind::Activation,
    });
    p.outputs.push((p.values.len() - 1) as ValueId);
    assert!(p.validate().unwrap_err().message.contains("`orphan`, which no op produces"));
}

#[test]
fn graph_well_formedness() {
    let check = |edit: &dyn Fn(&mut Payload), needle: &str| {
        let mut p = whisper_block();
        edit(&mut p);
        let err = p.validate().expect_err(needle);
        assert!(err.message.contains(needle), "`{err}` should mention `{needle}`");
        assert!(p.to_bytes().is_err(), "the writer refuses what validate refuses");
    };
    check(&|p| p.ops.swap(0, 1), "op 0 (`layer_norm`) input 0 uses value");
    check(&|p| p.ops[2].outputs = p.ops[1].outputs.clone(), "is produced twice");
    check(&|p| { p.ops[0].inputs.pop(); }, "op 0 (`embedding`) has 1 input(s)");
    check(&|p| p.ops[0].inputs.swap(0, 1), "indices");
    check(&|p| { p.inputs.pop(); }, "not in the delegate input list");
    check(&|p| p.inputs.push(0), "listed twice");
    check(&|p| p.outputs.push(p.outputs[0]), "listed twice");
    check(&|p| p.symbols[0].max = 0, "bounds");
    let find = |p: &Payload, name: &str| p.values.iter().position(|v| v.name == name).unwrap();
    check(&|p| { let i = find(p, "k_cache"); p.values[i].kind = ValueKind::State { init: StateInit::Named(String::new()) } }, "empty named_data key");
    check(&|p| { let i = find(p, "k_cache"); p.values[i].meta.dims[1] = Dim::Symbol(0) }, "has a dynamic dim");
    check(&|p| { let i = find(p, "k_cache"); p.values[i].kind = ValueKind::Activation }, "uses value");
    check(&|p| { let i = find(p, "wq"); p.values[i].meta.quant = None }, "without group scales");
    check(&|p| { let i = find(p, "wk"); p.values[i].meta.quant = Some(GroupQuant { group_size: 8, scales: 0 }) }, "has group scales but dtype f32");
    check(&|p| { let i = find(p, "wq"); p.values[i].meta.quant = Some(GroupQuant { group_size: 8, scales: 0 }) }, "must be a float constant");
    check(&|p| { let i = find(p, "wo"); p.ops[0].outputs = vec![i as ValueId] }, "`wo`, which is not an activation");
    check(&|p| {
        let cache_update = p.ops.iter().position(|n| matches!(n.op, Op::CacheUpdate { .. })).unwrap();
        p.ops[cache_update].inputs[0] = find(p, "wk") as ValueId;
    }, "must be a state value");
    check(&|p| {
        let attn = p.ops.iter().position(|n| matches!(n.op, Op::Attention { .. })).unwrap();
        p.ops[attn].op = Op::Attention { causal: true, scale: 0.5, num_heads: 3, num_kv_heads: 2 };
    }, "not a multiple of num_kv_heads");
    check(&|p| p.ops[5].op = Op::Permute { dims: vec![1, 0] }, "permutes 2 dims of a rank-3 input");
    check(&|p| {
        let cache_update = p.ops.iter().position(|n| matches!(n.op, Op::CacheUpdate { .. })).unwrap();
        p.ops[cache_update].op = Op::CacheUpdate { seq_dim: 4 };
    }, "seq_dim = 4 is out of range for rank 4");
    // Hand-built ops obey the same attribute rules as parsed ones.
    check(&|p| {
        let attn = p.ops.iter().position(|n| matches!(n.op, Op::Attention { .. })).unwrap();
        p.ops[attn].op = Op::Attention { causal: true, scale: 0.5, num_heads: 2, num_kv_heads: 0 };
    }, "`num_kv_heads` = 0 is out of range");
    check(&|p| p.ops[1].op = Op::LayerNorm { eps: f32::NAN, affine: true }, "not finite");
}

#[test]
fn state_init_must_be_declared() {
    let p = whisper_block();
    let bytes = p.to_bytes().unwrap();
    // The state init tag of `k_cache` is the byte after its kind byte (3); find it by writing
    // the same payload with a named init and comparing.
    let k = p.values.iter().position(|v| v.name == "k_cache").unwrap();
    assert!(matches!(p.values[k].kind, ValueKind::State { init: StateInit::Zeros }));
    let values = section(&bytes, 2);
    // Walk the values section with the documented layout to the `k_cache` entry.
    let mut at = values + 4;
    for v in &p.values[..k] {
        at += 4 + 1 + 1 + 9 * v.meta.dims.len() + if v.meta.quant.is_some() { 9 } else { 1 };
        at += match v.kind {
            ValueKind::Constant { .. } => 5,
            ValueKind::State { init: StateInit::Named(_) } => 6,
            ValueKind::State { init: StateInit::Zeros } => 2,
            _ => 1,
        };
    }
    let kind_at = at + 4 + 1 + 1 + 9 * 4 + 1;
    assert_eq!(bytes[kind_at..kind_at + 2], [3, 0], "kind state, init zeros");
    let mut bad = bytes.clone();
    bad[kind_at + 1] = 7;
    rejected(&bad, ErrorKind::UnknownCode, "state `k_cache` has unknown init tag 7");
}

/// Seeds the fuzz corpus with valid payloads (`cargo test -p rbuild-runtime --test gpu_payload
/// -- --ignored write_fuzz_seeds`), so libFuzzer starts past the header checks.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gpu_payload");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("whisper_block"), whisper_block().to_bytes().unwrap()).unwrap();
    std::fs::write(dir.join("softmax"), softmax_payload().to_bytes().unwrap()).unwrap();
    std::fs::write(dir.join("guarded"), guarded_payload().to_bytes().unwrap()).unwrap();
}
