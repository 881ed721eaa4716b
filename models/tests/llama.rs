//! The Llama definition, built from the shared tiny HF checkpoint, computes HF's no-cache
//! prefill logits, both by eager evaluation of the graph and as an emitted program run in
//! rbuild's runtime. Bad configs and missing weights are clear errors.

mod common;

use common::*;
use rbuild_export::passes::decompose;
use rbuild_export::{eval, passes};
use rbuild_models::llama::{self, Arch, LlamaConfig};
use rbuild_models::{build_llama, Weights};
use rbuild_runtime::ScalarType;

const S: usize = 12;
const VOCAB: usize = 512;

/// The prompt ids (int64 bytes), HF's logits and the tolerances of `prefill.json`.
fn prefill() -> (Vec<u8>, Vec<f32>, f32, f32) {
    let dir = model_dir("llama_tiny");
    let io = Weights::open(&dir.join("prefill.io.safetensors")).unwrap();
    let ids = io.get("input.0", ScalarType::Long, &[1, S]).unwrap().bytes().to_vec();
    let json = std::fs::read_to_string(dir.join("prefill.json")).unwrap();
    (ids, io.f32s("output.0", &[1, S, VOCAB]).unwrap(), json_number(&json, "atol"), json_number(&json, "rtol"))
}

#[test]
fn llama_tiny_prefill_matches_hf() {
    let g = build_llama(&model_dir("llama_tiny"), S).unwrap();
    assert_eq!(output_sizes(&g), [1, S, VOCAB]);
    assert_eq!(g.meta(g.inputs[0]).dtype, ScalarType::Long);
    // Per layer: 7 projections; plus lm_head.
    assert_eq!(count(&g, "aten::linear"), 2 * 7 + 1);
    assert_eq!(count(&g, "aten::_softmax"), 2);
    assert_eq!(count(&g, "aten::bmm"), 4);
    assert_eq!(count(&g, "aten::rsqrt"), 2 * 2 + 1);
    let (ids, want, atol, rtol) = prefill();

    // (a) eager evaluation of the graph (non-core ops decomposed first).
    let mut eager = g.clone();
    decompose::decompose(&mut eager, &Default::default()).unwrap();
    let got = floats(&eval::evaluate(&eager, std::slice::from_ref(&ids)).unwrap()[0]);
    assert_close(&got, &want, atol, rtol, "llama_tiny eager graph vs HF");

    // (b) the optimized, planned and emitted program in rbuild's runtime.
    let mut g = g;
    passes::optimize(&mut g).unwrap();
    let optimized = floats(&eval::evaluate(&g, std::slice::from_ref(&ids)).unwrap()[0]);
    assert_close(&optimized, &want, atol, rtol, "llama_tiny optimized graph vs HF");
    assert_close(&run_emitted(&g, ScalarType::Long, &[1, S], &ids), &want, atol, rtol, "llama_tiny emitted program vs HF");
}

/// Another length: the no-cache forward over prompt + 24 greedy tokens (`greedy` case,
/// `output.1`, logits [1, 36, 512]), through the emitted program.
#[test]
fn llama_tiny_36_tokens_match_hf_no_cache_forward() {
    let dir = model_dir("llama_tiny");
    let io = Weights::open(&dir.join("greedy.io.safetensors")).unwrap();
    let mut ids = io.get("input.0", ScalarType::Long, &[1, S]).unwrap().bytes().to_vec();
    ids.extend_from_slice(&io.get("output.0", ScalarType::Long, &[1, 24]).unwrap().bytes());
    let want = io.f32s("output.1", &[1, 36, VOCAB]).unwrap();
    let json = std::fs::read_to_string(dir.join("greedy.json")).unwrap();
    let (atol, rtol) = (json_number(&json, "atol"), json_number(&json, "rtol"));
    let mut g = build_llama(&dir, 36).unwrap();
    passes::optimize(&mut g).unwrap();
    assert_close(&run_emitted(&g, ScalarType::Long, &[1, 36], &ids), &want, atol, rtol, "llama_tiny 36 tokens, emitted program vs HF");
}

#[test]
fn config_is_read_from_rope_parameters_or_legacy_fields() {
    let c = LlamaConfig::load(&model_dir("llama_tiny").join("config.json")).unwrap();
    assert_eq!(
        c,
        LlamaConfig {
            arch: Arch::Llama,
            hidden_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 16,
            intermediate_size: 172,
            vocab_size: 512,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            rope_scaling: None,
            rope_freq_factors: None,
            tie_word_embeddings: false,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            qk_norm: false,
            max_position_embeddings: Some(256),
            sliding_window: None,
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
        }
    );
    let legacy = r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
        "intermediate_size": 128, "vocab_size": 32, "rope_theta": 500000.0, "rope_scaling": null}"#;
    let c = LlamaConfig::parse(legacy, "legacy").unwrap();
    assert_eq!((c.rope_theta, c.head_dim, c.num_key_value_heads), (500000.0, 16, 4));
}

#[test]
fn bad_configs_and_missing_weights_are_clear_errors() {
    let base = std::fs::read_to_string(model_dir("llama_tiny").join("config.json")).unwrap();
    let e = LlamaConfig::parse(&base.replace("\"llama\"", "\"gemma\""), "cfg").unwrap_err().to_string();
    assert!(e.contains("model_type 'gemma'") && e.contains("qwen3"), "{e}");
    let e = LlamaConfig::parse(&base.replace("\"silu\"", "\"gelu\""), "cfg").unwrap_err().to_string();
    assert!(e.contains("hidden_act 'gelu'"), "{e}");
    let e = LlamaConfig::parse(&base.replace("\"default\"", "\"yarn\""), "cfg").unwrap_err().to_string();
    assert!(e.contains("rope_type 'yarn'"), "{e}");
    let e = LlamaConfig::parse(&base.replace("\"hidden_size\": 64,", ""), "cfg").unwrap_err().to_string();
    assert!(e.contains("hidden_size is missing"), "{e}");
    let e = LlamaConfig::parse("[1]", "cfg").unwrap_err().to_string();
    assert!(e.contains("JSON object"), "{e}");

    let c = LlamaConfig::parse(&base, "cfg").unwrap();
    let full = shared_weights("llama_tiny");
    // A weights file without one layer's q_proj.
    let mut w = Weights::default();
    w.source = "partial.safetensors".into();
    for name in full.names() {
        if name != "model.layers.1.self_attn.q_proj.weight" {
            let shape = full.shape(name).unwrap().to_vec();
            w.insert(name, ScalarType::Float, &shape, full.get(name, ScalarType::Float, &shape).unwrap().bytes().to_vec());
        }
    }
    let e = llama::build(&c, &w, S).unwrap_err().to_string();
    assert!(e.contains("model.layers.1.self_attn.q_proj.weight") && e.contains("missing"), "{e}");
    // A config with more layers than the file has.
    let mut more = c.clone();
    more.num_hidden_layers = 3;
    let e = llama::build(&more, &full, S).unwrap_err().to_string();
    assert!(e.contains("model.layers.2.") && e.contains("missing"), "{e}");
    // A config with fewer layers leaves tensors unused.
    let mut fewer = c.clone();
    fewer.num_hidden_layers = 1;
    let e = llama::build(&fewer, &full, S).unwrap_err().to_string();
    assert!(e.contains("not used by llama"), "{e}");
}
