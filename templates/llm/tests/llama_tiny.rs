//! The runner on the real thing: llama_tiny (the shared Hugging Face checkpoint) exported by
//! rbuild's KV-cache LLM export, prompted with the reference's text, must produce Hugging
//! Face's 24 greedy tokens (`greedy.io.safetensors`), whether the program returns the last
//! row of logits or all of them, and whether the prompt goes in one call or in chunks.

use std::path::{Path, PathBuf};
use std::process::Command;

use rbuild_export::emit::{self, MethodSpec};
use rbuild_export::passes::{self, Options};
use rbuild_export::plan;
use rbuild_models::llama::{self, KvExport};
use rbuild_models::{Params, Weights};
use rbuild_runner_support::text::tokenizer;
use rbuild_runtime::ScalarType;

mod common;
use common::{temp_dir, testdata};

const BIN: &str = env!("CARGO_BIN_EXE_llama_runner");

fn export(dir: &Path, name: &str, o: &KvExport) -> PathBuf {
    let (c, w) = llama::open_checkpoint(Path::new(&testdata("models/llama_tiny"))).unwrap();
    let prog = llama::build_kv(&c, &mut Params::new(&w), o).unwrap();
    let mut g = prog.graph;
    passes::optimize_with(&mut g, &Options { decompose_linear: false, ..Default::default() }).unwrap();
    let mem = plan::plan_memory(&g);
    let bytes = emit::emit_program(&[MethodSpec { name: "forward", graph: &g, plan: &mem }], &prog.getters).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The reference's prompt ids (BOS + the first 11 tokens of its prompt text), their text, and
/// the 24 tokens Hugging Face generated after them.
fn reference() -> (String, Vec<u64>, Vec<u64>) {
    let io = Weights::open(Path::new(&testdata("models/llama_tiny/greedy.io.safetensors"))).unwrap();
    let longs = |name: &str, n: usize| -> Vec<u64> {
        io.get(name, ScalarType::Long, &[1, n]).unwrap().bytes().chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u64).collect()
    };
    let prompt_ids = longs("input.0", 12);
    let tok = tokenizer::load(Path::new(&testdata("models/llama_tiny/tokenizer.json"))).unwrap();
    let body: Vec<u32> = prompt_ids[1..].iter().map(|&i| i as u32).collect();
    let text = tok.decode(&body, false).unwrap();
    (text, prompt_ids, longs("output.0", 24))
}

fn generate(model: &Path, prompt: &str, extra: &[&str]) -> serde_json::Value {
    let tok = testdata("models/llama_tiny/tokenizer.json");
    let mut args = vec!["--model", model.to_str().unwrap(), "--tokenizer", &tok, "--prompt", prompt, "--temperature", "0", "--max-new-tokens", "24", "--json"];
    args.extend_from_slice(extra);
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

#[test]
fn greedy_tokens_equal_hugging_face() {
    let (prompt, prompt_ids, want) = reference();
    let dir = temp_dir("llama_tiny");
    for (name, o) in [
        ("last.pte", KvExport { max_seq_len: 64, full_logits: false }),
        ("full.pte", KvExport { max_seq_len: 64, full_logits: true }),
    ] {
        let model = export(&dir, name, &o);
        let j = generate(&model, &prompt, &[]);
        assert_eq!(ids(&j["prompt_token_ids"]), prompt_ids, "{name}");
        assert_eq!(ids(&j["generated_token_ids"]), want, "{name}");
        let j = generate(&model, &prompt, &["--threads", "2"]);
        assert_eq!(ids(&j["generated_token_ids"]), want, "{name}, 2 threads");
        // A warm-up generation first leaves the cache full of its entries: the reported run
        // must not see them.
        let j = generate(&model, &prompt, &["--warmup"]);
        assert_eq!(ids(&j["generated_token_ids"]), want, "{name}, after a warm-up run");
        // The prompt in chunks of 5, 5 and 2 tokens: the cache carries the earlier ones.
        let j = generate(&model, &prompt, &["--prefill-chunk", "5"]);
        assert_eq!(ids(&j["generated_token_ids"]), want, "{name}, prefill in chunks");
    }
}

/// The Core-ATen-only export (no KV cache, fixed input length, full logits, the program
/// ExecuTorch runs as-is): the runner pads each step's sequence and reads its last real row.
#[test]
fn core_aten_fixed_length_program_gives_the_same_tokens() {
    use rbuild_export::emit::Getter;
    let (prompt, _, want) = reference();
    let (c, w) = llama::open_checkpoint(Path::new(&testdata("models/llama_tiny"))).unwrap();
    let n = 40;
    let mut g = llama::build(&c, &w, n).unwrap();
    passes::optimize_with(&mut g, &Options { decompose_linear: true, ..Default::default() }).unwrap();
    let mem = plan::plan_memory(&g);
    let getters = vec![
        Getter::int("get_max_seq_len", n as i64),
        Getter::int("get_vocab_size", 512),
        Getter::bool("use_kv_cache", false),
        Getter::bool("enable_dynamic_shape", false),
        Getter::int("get_bos_id", 1),
        Getter::ints("get_eos_ids", &[2]),
    ];
    let bytes = emit::emit_program(&[MethodSpec { name: "forward", graph: &g, plan: &mem }], &getters).unwrap();
    let dir = temp_dir("llama_tiny_core_aten");
    let model = dir.join("core_aten.pte");
    std::fs::write(&model, bytes).unwrap();
    let j = generate(&model, &prompt, &[]);
    assert_eq!(ids(&j["generated_token_ids"]), want);
    // 12 + 29 > 40: refused before running, with the numbers.
    let tok = testdata("models/llama_tiny/tokenizer.json");
    let o = Command::new(BIN)
        .args(["--model", model.to_str().unwrap(), "--tokenizer", &tok, "--prompt", &prompt, "--max-new-tokens", "29"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("41") && e.contains("40"), "{e}");
}

/// `forward_rows` (what perplexity needs): a full-logits program returns one row per token, a
/// last-row program one row, and each position's row is what `forward` computes for the prefix
/// ending there.
#[test]
fn forward_rows_give_every_position_of_a_full_logits_program() {
    use rbuild_llm_runner::generate::Model;
    use rbuild_llm_runner::program::load_model;
    let (_, prompt_ids, _) = reference();
    let tokens: Vec<u32> = prompt_ids.iter().map(|&t| t as u32).collect();
    let dir = temp_dir("llama_tiny_rows");
    let load = |name: &str, full_logits: bool| std::fs::read(export(&dir, name, &KvExport { max_seq_len: 64, full_logits })).unwrap();
    let (full, last) = (load("full.pte", true), load("last.pte", false));
    let kernels = rbuild_llm_runner::kernels::registry();
    let (full_prog, last_prog) = (rbuild_runtime::Program::load(&full).unwrap(), rbuild_runtime::Program::load(&last).unwrap());
    let (mut f, _) = load_model(&full_prog, &kernels, 1).unwrap();
    let (mut l, _) = load_model(&last_prog, &kernels, 1).unwrap();
    let rows = f.forward_rows(&tokens, 0).unwrap();
    assert_eq!((rows.rows(), rows.vocab), (tokens.len(), 512));
    assert_eq!(l.forward_rows(&tokens, 0).unwrap().rows(), 1);
    for (pos, &t) in tokens.iter().enumerate() {
        // Token by token through the KV cache: the row of the prefix ending at `pos`.
        let want = l.forward(&[t], pos).unwrap();
        let worst = rows.row(pos).iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-4, "position {pos}: max |diff| {worst}");
    }
    assert!(f.forward_rows(&vec![1; 65], 0).unwrap_err().contains("at most 64 tokens"));
}
