//! Voxtral from the shared tiny HF checkpoint (`voxtral_tiny`) through the family export, run in
//! rbuild's runtime: the audio encoder (and its encoder states) against PyTorch, the prompt's
//! prefill logits, greedy decoding with the KV cache against HF, a quantized export, and the
//! config checks.

mod common;

use common::*;
use rbuild_export::passes;
use rbuild_models::family::{self, ExportOptions, SizeRequest, Source};
use rbuild_models::voxtral::{graph, VoxtralConfig};
use rbuild_models::{Params, Weights};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Method, Program, ScalarType, Value};
use serde_json::Value as Json;

fn dir() -> std::path::PathBuf {
    model_dir("voxtral_tiny")
}

fn json(name: &str) -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir().join(name)).unwrap()).unwrap()
}

/// The shape of `name` among a case json's inputs/outputs.
fn shape(meta: &Json, name: &str) -> Vec<usize> {
    let all = meta["inputs"].as_array().unwrap().iter().chain(meta["outputs"].as_array().unwrap());
    let t = all.into_iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not described"));
    t["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect()
}

fn tolerances(meta: &Json) -> (f32, f32) {
    (meta["atol"].as_f64().unwrap() as f32, meta["rtol"].as_f64().unwrap() as f32)
}

fn export(o: &ExportOptions) -> AlignedBuf {
    let f = family::family("voxtral").unwrap();
    let (bytes, _) = family::export(f, &Source::Checkpoint(dir()), o).unwrap();
    AlignedBuf::from_bytes(&bytes)
}

fn longs(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64
}

/// `mel128.first320`: the features every case uses.
fn features(meta: &Json) -> Vec<f32> {
    let (file, key) = meta["features"].as_str().unwrap().split_once(" key ").unwrap();
    let path = model_dir("audio").join(file.strip_prefix("models/audio/").unwrap());
    Weights::open(&path).unwrap().f32s(key, &shape(meta, "input.1")).unwrap()
}

fn run(m: &mut Method<'_>) {
    m.execute(&mut KernelContext::default()).unwrap();
}

fn audio_embeddings(m: &mut Method<'_>, features: &[f32], sizes: &[usize]) -> Vec<f32> {
    m.set_input_tensor(0, ScalarType::Float, sizes, &f32_bytes(features)).unwrap();
    run(m);
    floats(m.output_bytes(0).unwrap())
}

fn embed_tokens(m: &mut Method<'_>, ids: &[i64]) -> Vec<f32> {
    let b: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Long, &[1, ids.len()], &b).unwrap();
    run(m);
    floats(m.output_bytes(0).unwrap())
}

fn decode(m: &mut Method<'_>, embeddings: &[f32], hidden: usize, pos: i64) -> Vec<f32> {
    m.set_input_tensor(0, ScalarType::Float, &[1, embeddings.len() / hidden, hidden], &f32_bytes(embeddings)).unwrap();
    m.set_input_tensor(1, ScalarType::Long, &[1], &pos.to_le_bytes()).unwrap();
    run(m);
    floats(m.output_bytes(0).unwrap())
}

/// The prompt's embeddings: the ids' embeddings with the audio placeholders replaced, in
/// order, by the audio embeddings.
fn prompt_embeddings(ids: &[i64], text: &[f32], audio: &[f32], audio_token: i64, hidden: usize) -> Vec<f32> {
    let mut audio_rows = audio.chunks_exact(hidden);
    let out: Vec<f32> = ids
        .iter()
        .zip(text.chunks_exact(hidden))
        .flat_map(|(&id, row)| if id == audio_token { audio_rows.next().expect("more placeholders than audio tokens") } else { row }.to_vec())
        .collect();
    assert!(audio_rows.next().is_none(), "audio tokens left over");
    out
}

#[test]
fn encoder_prefill_and_greedy_match_hf() {
    let meta = json("forward.json");
    let (atol, rtol) = tolerances(&meta);
    let config = VoxtralConfig::load(&dir()).unwrap();
    let hidden = config.text.hidden_size;
    let buf = export(&ExportOptions { max_seq_len: Some(SizeRequest::Exactly(64)), full_logits: true, ..ExportOptions::default() });
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let getter = |name: &str| {
        let mut m = program.load_method(name, &reg, &BackendRegistry::new()).unwrap();
        run(&mut m);
        m.output_value(0).cloned().unwrap()
    };
    let int = |name: &str| match getter(name) {
        Value::Int(v) => v,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(int("get_audio_token_id"), meta["audio_token_id"].as_i64().unwrap());
    assert_eq!(int("get_tokens_per_chunk") as u64, meta["num_audio_tokens"].as_u64().unwrap());
    let features_shape = shape(&meta, "input.1");
    assert_eq!((int("get_n_mels") as usize, int("get_chunk_frames") as usize), (features_shape[1], features_shape[2]));
    assert_eq!((int("get_max_seq_len"), int("get_max_chunks"), int("get_sample_rate"), int("get_hidden_size")), (64, 1, 16000, hidden as i64));
    assert_eq!((int("get_bos_id"), int("get_eos_ids")), (1, 2));

    // Audio encoder: projected embeddings vs PyTorch.
    let io = Weights::open(&dir().join("forward.io.safetensors")).unwrap();
    let features = features(&meta);
    assert_eq!(features, io.f32s("input.1", &features_shape).unwrap(), "the case's features are mel128.first320");
    let mut encoder = program.load_method("audio_encoder", &reg, &BackendRegistry::new()).unwrap();
    let audio = audio_embeddings(&mut encoder, &features, &features_shape);
    assert_close(&audio, &io.f32s("output.1", &shape(&meta, "output.1")).unwrap(), atol, rtol, "audio embeddings vs PyTorch");

    // Prefill: the whole prompt in one call, logits of every position.
    let ids_shape = shape(&meta, "input.0");
    let ids = longs(&io.get("input.0", ScalarType::Long, &ids_shape).unwrap().bytes());
    let mut embed = program.load_method("token_embedding", &reg, &BackendRegistry::new()).unwrap();
    let text = embed_tokens(&mut embed, &ids);
    let prompt = prompt_embeddings(&ids, &text, &audio, config.audio_token_id, hidden);
    let mut decoder = program.load_method("text_decoder", &reg, &BackendRegistry::new()).unwrap();
    let logits = decode(&mut decoder, &prompt, hidden, 0);
    let want = io.f32s("output.0", &shape(&meta, "output.0")).unwrap();
    assert_close(&logits, &want, atol, rtol, "prefill logits (all positions) vs PyTorch");

    // Greedy with the cache: one token per call.
    let greedy_meta = json("greedy.json");
    let greedy = Weights::open(&dir().join("greedy.io.safetensors")).unwrap();
    let steps_shape = shape(&greedy_meta, "output.1");
    let (steps, vocab) = (steps_shape[1], steps_shape[2]);
    let want_steps = greedy.f32s("output.1", &steps_shape).unwrap();
    let want_ids = longs(&greedy.get("output.0", ScalarType::Long, &shape(&greedy_meta, "output.0")).unwrap().bytes());
    let mut last = logits[logits.len() - vocab..].to_vec();
    let mut got = Vec::new();
    for step in 0..steps {
        assert_close(&last, &want_steps[step * vocab..(step + 1) * vocab], atol, rtol, &format!("greedy step {step} logits"));
        let next = argmax(&last);
        got.push(next);
        let row = embed_tokens(&mut embed, &[next]);
        last = decode(&mut decoder, &row, hidden, (ids.len() + step) as i64);
    }
    assert_eq!(got, want_ids);
    let hf: Vec<i64> = greedy_meta["hf_generate_new_tokens"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(got, hf, "greedy ids vs HF generate");
}

/// The audio tower alone (a graph beside the program) against HF's encoder states, and a batch
/// of two chunks encodes each on its own.
#[test]
fn encoder_states_match_hf_and_chunks_are_independent() {
    let meta = json("forward.json");
    let (atol, rtol) = tolerances(&meta);
    let config = VoxtralConfig::load(&dir()).unwrap();
    let w = Weights::open(&dir().join("model.safetensors")).unwrap();
    let mut g = graph::audio_encoder_states(&config, &mut Params::new(&w), 2).unwrap();
    passes::optimize_with(&mut g, &passes::Options { decompose_linear: false, ..Default::default() }).unwrap();
    let features = features(&meta);
    let one = features.len();
    let io = Weights::open(&dir().join("forward.io.safetensors")).unwrap();
    let want = io.f32s("output.2", &shape(&meta, "output.2")).unwrap();
    let mut sizes = shape(&meta, "input.1");
    let got = run_emitted(&g, ScalarType::Float, &sizes, &f32_bytes(&features));
    assert_close(&got, &want, atol, rtol, "encoder states vs PyTorch");
    // Two chunks: the fox, then silence-level features; the fox's states are unchanged.
    let mut two = features.clone();
    two.extend(features.iter().map(|_| -0.5f32));
    sizes[0] = 2;
    let got = run_emitted(&g, ScalarType::Float, &sizes, &f32_bytes(&two));
    assert_eq!(got.len(), 2 * want.len());
    assert_close(&got[..want.len()], &want, atol, rtol, "chunk 0 of two vs PyTorch");
    assert_eq!(one * 2, two.len());
}

/// Quantized linears (every method's: encoder, projector, decoder) and embedding: the program
/// runs and its prefill logits stay close to float32's.
#[test]
fn quantized_export_stays_close() {
    use rbuild_export::passes::quantize::{EmbeddingQuant, LinearQuant};
    let meta = json("forward.json");
    let config = VoxtralConfig::load(&dir()).unwrap();
    let hidden = config.text.hidden_size;
    let io = Weights::open(&dir().join("forward.io.safetensors")).unwrap();
    let ids = longs(&io.get("input.0", ScalarType::Long, &shape(&meta, "input.0")).unwrap().bytes());
    let features = features(&meta);
    let reg = rbuild_kernels::registry();
    let prefill = |o: &ExportOptions| {
        let buf = export(o);
        let program = Program::load(buf.as_slice()).unwrap();
        let load = |name: &str| program.load_method(name, &reg, &BackendRegistry::new()).unwrap();
        let audio = audio_embeddings(&mut load("audio_encoder"), &features, &shape(&meta, "input.1"));
        let text = embed_tokens(&mut load("token_embedding"), &ids);
        decode(&mut load("text_decoder"), &prompt_embeddings(&ids, &text, &audio, config.audio_token_id, hidden), hidden, 0)
    };
    let base = ExportOptions { max_seq_len: Some(SizeRequest::Exactly(64)), ..ExportOptions::default() };
    let reference = prefill(&base);
    // Bounds as llama_tiny's: int8 per-channel weights are ~1% off, 4-bit groups ~20%.
    for (name, linear, embedding, bound) in [
        ("int8", LinearQuant::Int8, None, 0.03),
        ("8da4w-g32", LinearQuant::Int8DynInt4 { group: 32 }, None, 0.25),
        ("8da4w-g32 + int8 embedding", LinearQuant::Int8DynInt4 { group: 32 }, Some(EmbeddingQuant::Int8), 0.25),
    ] {
        let quantized = prefill(&ExportOptions { linear: Some(linear), embedding, ..base.clone() });
        let num: f64 = quantized.iter().zip(&reference).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
        let den: f64 = reference.iter().map(|b| (*b as f64).powi(2)).sum();
        let rel = (num / den).sqrt();
        eprintln!("{name}: last-position logits, relative RMS error vs float32 {rel:.4}");
        assert!(rel > 0.0 && rel < bound, "{name}: relative RMS {rel} above {bound}");
    }
}

#[test]
fn config_errors_name_the_field() {
    let base = std::fs::read_to_string(dir().join("config.json")).unwrap();
    let bad = |from: &str, to: &str| {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{from} not in config.json");
        VoxtralConfig::parse(&text, "config.json").unwrap_err().to_string()
    };
    assert!(bad("\"projector_hidden_act\": \"gelu\"", "\"projector_hidden_act\": \"silu\"").contains("projector_hidden_act 'silu'"));
    assert!(bad("\"rope_type\": \"default\"", "\"rope_type\": \"dynamic\"").contains("text_config: rope_type 'dynamic'"));
    assert!(bad("\"max_source_positions\": 160", "\"max_source_positions\": 150").contains("max_source_positions 150"));
    assert!(bad("\"num_attention_heads\": 4", "\"num_attention_heads\": 5").contains("audio_config: hidden_size 64 is not a multiple of num_attention_heads 5"));
    let c = VoxtralConfig::parse(&base, "config.json").unwrap();
    assert_eq!((c.tokens_per_chunk(), c.chunk_frames(), c.text.head_dim, c.text.rope_theta), (40, 320, 16, 1e8));
    // A checkpoint missing a projector weight is an error naming it.
    let tmp = std::env::temp_dir().join(format!("rbuild-voxtral-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::copy(dir().join("config.json"), tmp.join("config.json")).unwrap();
    let w = Weights::open(&dir().join("model.safetensors")).unwrap();
    let mut partial = Weights::default();
    for n in w.names() {
        if n != "multi_modal_projector.linear_2.weight" {
            let shape = w.shape(n).unwrap().to_vec();
            partial.insert(n, ScalarType::Float, &shape, f32_bytes(&w.f32s(n, &shape).unwrap()));
        }
    }
    partial.save(&tmp.join("model.safetensors")).unwrap();
    let f = family::family("voxtral").unwrap();
    let e = family::export(f, &Source::Checkpoint(tmp.clone()), &ExportOptions::default()).err().unwrap().to_string();
    std::fs::remove_dir_all(&tmp).unwrap();
    assert!(e.contains("multi_modal_projector.linear_2.weight"), "{e}");
}

#[test]
fn demo_exports() {
    let f = family::family("voxtral").unwrap();
    let (bytes, report) = family::export(f, &Source::Demo { seed: 7 }, &ExportOptions::default()).unwrap();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    for m in ["preprocessor", "audio_encoder", "token_embedding", "text_decoder", "get_audio_token_id", "get_vocab_size"] {
        assert!(program.method_names().contains(&m), "{m}: {}", report.description);
    }
    // The demo runs end to end: 3 s of its voice → one chunk → 40 audio tokens → a token id.
    let reg = rbuild_kernels::registry();
    let load = |name: &str| program.load_method(name, &reg, &BackendRegistry::new()).unwrap();
    let wave = rbuild_models::whisper::demo_audio::demo_samples(3.0);
    let mut pre = load("preprocessor");
    pre.set_input_tensor(0, ScalarType::Float, &[wave.len()], &f32_bytes(&wave)).unwrap();
    run(&mut pre);
    let features = floats(pre.output_bytes(0).unwrap());
    assert_eq!(features.len(), 128 * 320);
    let audio = audio_embeddings(&mut load("audio_encoder"), &features, &[1, 128, 320]);
    assert_eq!(audio.len(), 40 * 64);
    let mut ids = vec![1, 3, 25];
    ids.extend([24; 40]);
    ids.extend([26, 34]);
    let text = embed_tokens(&mut load("token_embedding"), &ids);
    let logits = decode(&mut load("text_decoder"), &prompt_embeddings(&ids, &text, &audio, 24, 64), 64, 0);
    assert_eq!(logits.len(), 1300);
    assert!(logits.iter().all(|v| v.is_finite()));
}

/// The in-program front end on the fox's waveform gives the features HF's extractor gives
/// (`mel128.first320`: one 320-frame chunk, normalised over the padded 30 s).
#[test]
fn preprocessor_matches_the_feature_extractor() {
    let meta = json("forward.json");
    let buf = export(&ExportOptions { max_seq_len: Some(SizeRequest::Exactly(128)), ..ExportOptions::default() });
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("preprocessor", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    let audio = Weights::open(&model_dir("audio").join("fox_16k.features.safetensors")).unwrap();
    let n = audio.shape("waveform").unwrap()[0];
    let wave = audio.f32s("waveform", &[n]).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[n], &f32_bytes(&wave)).unwrap();
    run(&mut m);
    let Some(Value::Tensor(t)) = m.output_value(0) else { panic!("no tensor output") };
    assert_eq!(t.shape.as_slice(), shape(&meta, "input.1").as_slice());
    assert_close(&floats(m.output_bytes(0).unwrap()), &features(&meta), 1e-4, 0.0, "preprocessor vs WhisperFeatureExtractor");
    // Longer audio: more chunks, the first unchanged (the padded length stays 30 s).
    let mut longer = wave.clone();
    longer.resize(n + 320 * 160, 0.0);
    m.set_input_tensor(0, ScalarType::Float, &[longer.len()], &f32_bytes(&longer)).unwrap();
    run(&mut m);
    let Some(Value::Tensor(t)) = m.output_value(0) else { panic!("no tensor output") };
    assert_eq!(t.shape[0], 2);
    let got = floats(m.output_bytes(0).unwrap());
    assert_close(&got[..got.len() / 2], &features(&meta), 1e-4, 0.0, "chunk 0 of a longer input");
    // Beyond get_max_audio_samples (3 chunks at max_seq_len 128) is refused by the bounds.
    let too_long = vec![0f32; 3 * 320 * 160 + 1];
    assert!(m.set_input_tensor(0, ScalarType::Float, &[too_long.len()], &f32_bytes(&too_long)).is_err());
}

/// ExecuTorch's Python: $RBUILD_PYTHON, else the repo's (or the main checkout's) .venv; None
/// (the test skips) without one, a failure in CI.
fn oracle_python() -> Option<std::path::PathBuf> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [std::env::var_os("RBUILD_PYTHON").map(Into::into), Some(repo.join(".venv/bin/python")), Some(repo.join("../main/.venv/bin/python"))];
    let found = candidates.into_iter().flatten().find(|p: &std::path::PathBuf| p.exists());
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must provide the ExecuTorch oracle venv (.venv)");
        eprintln!("SKIPPED: no ExecuTorch oracle venv");
    }
    found
}

/// ExecuTorch 1.3.1 loads the program and runs `token_embedding` with rbuild's result.
/// `audio_encoder` stops only at `llama::custom_sdpa.out`, an LLM custom op the oracle's
/// Python build does not register (every other operator resolves); ExecuTorch builds with
/// its LLM custom ops (its Voxtral runner's) have it.
#[test]
fn executorch_loads_the_program_and_runs_token_embedding() {
    let Some(python) = oracle_python() else { return };
    let meta = json("forward.json");
    let buf = export(&ExportOptions { max_seq_len: Some(SizeRequest::Exactly(64)), ..ExportOptions::default() });
    let tmp = std::env::temp_dir().join(format!("rbuild-voxtral-et-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let pte = tmp.join("voxtral.pte");
    std::fs::write(&pte, buf.as_slice()).unwrap();
    let io = dir().join("forward.io.safetensors");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tool/python/et_run.py");
    let et = |method: &str, key: &str| -> Result<Vec<f32>, String> {
        let out = tmp.join(format!("{method}.out.safetensors"));
        let o = std::process::Command::new(&python).arg(&script).arg(&pte).arg(&io).arg(key).arg(&out).arg(method).output().unwrap();
        if !o.status.success() {
            return Err(format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)));
        }
        let w = Weights::open(&out).unwrap();
        let sizes = w.shape("output.0").unwrap().to_vec();
        Ok(w.f32s("output.0", &sizes).unwrap())
    };
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let w = Weights::open(&io).unwrap();
    let ids = longs(&w.get("input.0", ScalarType::Long, &shape(&meta, "input.0")).unwrap().bytes());
    let ours = embed_tokens(&mut program.load_method("token_embedding", &reg, &BackendRegistry::new()).unwrap(), &ids);
    let theirs = et("token_embedding", "input.0").unwrap_or_else(|e| panic!("token_embedding in ExecuTorch: {e}"));
    assert_close(&theirs, &ours, 0.0, 0.0, "token_embedding: ExecuTorch vs rbuild");
    match et("audio_encoder", "input.1") {
        Ok(got) => {
            let (atol, rtol) = tolerances(&meta);
            assert_close(&got, &w.f32s("output.1", &shape(&meta, "output.1")).unwrap(), atol, rtol, "audio_encoder in ExecuTorch vs PyTorch");
        }
        Err(e) => {
            let missing: Vec<&str> = e.lines().filter(|l| l.contains("Missing operator")).collect();
            assert!(!missing.is_empty() && missing.iter().all(|l| l.contains("llama::custom_sdpa.out")), "audio_encoder in ExecuTorch: {e}");
            eprintln!("audio_encoder in ExecuTorch: only llama::custom_sdpa.out is missing ({} calls)", missing.len());
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}
