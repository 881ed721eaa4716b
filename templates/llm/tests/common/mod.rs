//! Shared test helpers: test data paths, scratch folders, and a hand-built LLM-shaped program.

#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub fn testdata(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    root.join(rel).to_string_lossy().into_owned()
}

// The tiktoken rank file of the tokenizer tests in templates/support.
#[path = "../../../support/tests/common/tiktoken_ranks.rs"]
mod tiktoken_ranks;
#[allow(unused_imports)]
pub use tiktoken_ranks::{rank_file, MERGES};

/// A fresh, empty scratch folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rbuild-llm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

use rbuild_export::graph::TensorMeta;
use rbuild_export::emit::{self, Getter, MethodSpec};
use rbuild_export::{passes, plan, ConstData, Dim, GraphBuilder};
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
        let mut getters = Vec::new();
        if self.getters {
            getters = vec![
                Getter::int("get_max_seq_len", self.max_seq_len as i64),
                Getter::int("get_vocab_size", v as i64),
                Getter::int("get_bos_id", 1),
                Getter::ints("get_eos_ids", &self.eos_ids),
                Getter::bool("use_kv_cache", self.kv),
                Getter::bool("enable_dynamic_shape", true),
            ];
            if let Some(c) = self.max_context_len {
                getters.push(Getter::int("get_max_context_len", c));
            }
        }
        emit::emit_program(&[MethodSpec { name: "forward", graph: &g, plan: &mp }], &getters).unwrap()
    }

    /// Writes the program into `dir` and returns its path.
    pub fn write(&self, dir: &std::path::Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, self.build()).unwrap();
        p
    }
}
