//! Shared test helpers: test data paths, scratch folders, and a hand-built LLM-shaped program.

#![allow(dead_code)]

use std::path::PathBuf;

pub fn testdata(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    root.join(rel).to_string_lossy().into_owned()
}

/// A fresh, empty scratch folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rbuild-llm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

use rbuild_export::graph::TensorMeta;
use rbuild_export::{emit, passes, plan, ConstData, Dim, GraphBuilder};
use rbuild_runtime::format::schema::{
    self as fb, Chain, ContainerMetadata, EValue, ExecutionPlan, KernelTypes,
};
use rbuild_runtime::format::{write_pte, PteFile};
use rbuild_runtime::ScalarType;

/// A tiny program with the LLM runner's signature whose next token is easy to predict:
/// `forward(tokens [1, S], input_pos [1]) -> logits [1, S, V]` with
/// `logits[s] = W[tokens[s]] + P[input_pos]`, where `W[t]` is one-hot at `next(t)` (weight 1)
/// and `P[p]` is 1.5 at `bias[p]` for the positions listed in `bias` (else 0). Without a KV
/// cache the method has only `tokens` and `logits[s] = W[tokens[s]]`.
#[derive(Clone, Debug)]
pub struct Toy {
    pub vocab: usize,
    pub max_seq_len: usize,
    pub kv: bool,
    /// (position, token) pairs: a call starting at `position` predicts `token`.
    pub bias: Vec<(usize, usize)>,
    /// (token, next) overrides of the default `next(t) = (t + 1) % vocab`.
    pub next_override: Vec<(usize, usize)>,
    pub eos_ids: Vec<i64>,
    pub getters: bool,
    pub max_context_len: Option<i64>,
}

impl Toy {
    pub fn new(kv: bool) -> Toy {
        Toy {
            vocab: 512,
            max_seq_len: 48,
            kv,
            bias: Vec::new(),
            next_override: Vec::new(),
            eos_ids: vec![2],
            getters: true,
            max_context_len: None,
        }
    }

    pub fn next(&self, t: usize) -> usize {
        self.next_override.iter().find(|(a, _)| *a == t).map_or((t + 1) % self.vocab, |(_, b)| *b)
    }

    /// What one call predicts.
    pub fn predict(&self, tokens: &[u32], start_pos: usize) -> u32 {
        if self.kv {
            if let Some((_, b)) = self.bias.iter().find(|(p, _)| *p == start_pos) {
                return *b as u32;
            }
        }
        self.next(*tokens.last().unwrap() as usize) as u32
    }

    /// Greedy generation as the runner should do it (prompt in one call).
    pub fn simulate(&self, prompt: &[u32], max_new: usize, eos: &[u32]) -> Vec<u32> {
        let mut seq = prompt.to_vec();
        let mut out = Vec::new();
        let mut next = self.predict(prompt, 0);
        loop {
            out.push(next);
            seq.push(next);
            if eos.contains(&next) || out.len() == max_new {
                return out;
            }
            next = if self.kv { self.predict(&[next], seq.len() - 1) } else { self.predict(&seq, 0) };
        }
    }

    pub fn build(&self) -> Vec<u8> {
        let v = self.vocab;
        let f32s = |x: &[f32]| x.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        let mut w = vec![0f32; v * v];
        for t in 0..v {
            w[t * v + self.next(t)] = 1.0;
        }
        let mut b = GraphBuilder::new();
        let s = b.sym("seq_len", 1, self.max_seq_len);
        let tokens = b.input("tokens", TensorMeta::new(ScalarType::Long, vec![Dim::Fixed(1), s]));
        let wc = b.constant("w", ScalarType::Float, &[v, v], ConstData::owned(f32s(&w))).unwrap();
        let mut logits = b.embedding(wc, tokens).unwrap();
        if self.kv {
            let pos = b.input("input_pos", TensorMeta::fixed(ScalarType::Long, &[1]));
            let mut p = vec![0f32; self.max_seq_len * v];
            for &(at, tok) in &self.bias {
                p[at * v + tok] = 1.5;
            }
            let pc = b.constant("p", ScalarType::Float, &[self.max_seq_len, v], ConstData::owned(f32s(&p))).unwrap();
            let bias = b.embedding(pc, pos).unwrap();
            logits = b.add(logits, bias).unwrap();
        }
        b.output(logits);
        let mut g = b.finish();
        passes::optimize(&mut g).unwrap();
        let mp = plan::plan_memory(&g);
        let bytes = emit::emit(&g, &mp, "forward").unwrap();
        if !self.getters {
            return bytes;
        }
        let file = PteFile::parse(&bytes).unwrap();
        let segs: Vec<&[u8]> = (0..file.segments().len()).map(|i| file.segment(i).unwrap()).collect();
        let mut program = file.program.clone();
        let int = |x: i64| EValue { val: Some(KernelTypes::Int(fb::Int { int_val: x })) };
        let flag = |x: bool| EValue { val: Some(KernelTypes::Bool(fb::Bool { bool_val: x })) };
        let mut getters: Vec<(&str, Vec<EValue>)> = vec![
            ("get_max_seq_len", vec![int(self.max_seq_len as i64)]),
            ("get_vocab_size", vec![int(v as i64)]),
            ("get_bos_id", vec![int(1)]),
            ("get_eos_ids", self.eos_ids.iter().map(|&e| int(e)).collect()),
            ("use_kv_cache", vec![flag(self.kv)]),
            ("enable_dynamic_shape", vec![flag(true)]),
        ];
        if let Some(c) = self.max_context_len {
            getters.push(("get_max_context_len", vec![int(c)]));
        }
        let plans = program.execution_plan.get_or_insert_with(Vec::new);
        for (name, values) in getters {
            let n = values.len() as i32;
            // ExecuTorch's _emit_prim_getters: constant values, no instructions.
            plans.push(ExecutionPlan {
                name: Some(name),
                container_meta_type: Some(ContainerMetadata { encoded_inp_str: Some(""), encoded_out_str: Some("") }),
                values: Some(values),
                inputs: Some(vec![]),
                outputs: Some((0..n).collect()),
                chains: Some(vec![Chain { inputs: Some(vec![]), outputs: Some(vec![]), instructions: Some(vec![]), stacktrace: None }]),
                operators: Some(vec![]),
                delegates: Some(vec![]),
                non_const_buffer_sizes: Some(vec![0]),
                non_const_buffer_device: None,
            });
        }
        write_pte(&program, &segs)
    }

    /// Writes the program into `dir` and returns its path.
    pub fn write(&self, dir: &std::path::Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, self.build()).unwrap();
        p
    }
}
