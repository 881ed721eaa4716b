//! Whisper from the shared tiny HF checkpoint through the family export: the front end's
//! constants against the feature extractor's, the encoder and decoder against PyTorch's
//! outputs, greedy decoding against HF's `generate`, the in-program log-mel against the
//! extractor's features, and the config checks.

mod common;

use common::*;
use rbuild_models::family::{self, ExportOptions, SizeRequest, Source};
use rbuild_models::whisper::{features, WhisperConfig};
use rbuild_models::Weights;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Method, Program, ScalarType, Value};

const VOCAB: usize = 512;

fn export(o: &ExportOptions) -> AlignedBuf {
    let f = family::family("whisper").unwrap();
    let (bytes, _) = family::export(f, &Source::Checkpoint(model_dir("whisper_tiny")), o).unwrap();
    AlignedBuf::from_bytes(&bytes)
}

fn audio() -> Weights {
    Weights::open(&model_dir("audio").join("fox_16k.features.safetensors")).unwrap()
}

fn longs(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64
}

fn run_encoder(m: &mut Method<'_>, features: &[f32]) -> Vec<f32> {
    m.set_input_tensor(0, ScalarType::Float, &[1, 80, 300], &f32_bytes(features)).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    floats(m.output_bytes(0).unwrap())
}

/// text_decoder(tokens, encoder_hidden, [pos]) → last logits.
fn decode(m: &mut Method<'_>, ids: &[i64], hidden: &[f32], pos: i64) -> Vec<f32> {
    let ids_b: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Long, &[1, ids.len()], &ids_b).unwrap();
    m.set_input_tensor(1, ScalarType::Float, &[1, 150, 64], &f32_bytes(hidden)).unwrap();
    m.set_input_tensor(2, ScalarType::Long, &[1], &pos.to_le_bytes()).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    floats(m.output_bytes(0).unwrap())
}

#[test]
fn front_end_constants_match_the_feature_extractor() {
    let a = audio();
    let hann = a.f32s("hann_window_400", &[400]).unwrap();
    let ours = features::hann_window(400);
    // torch evaluates the window in float32; ours rounds the double once.
    assert_close(&ours, &hann, 1e-6, 0.0, "periodic Hann window");
    for mels in [80, 128] {
        // Stored [201, n_mels]; ours [n_mels, 201].
        let want = a.f32s(&format!("mel_filters_{mels}"), &[201, mels]).unwrap();
        let ours = features::mel_filters(16_000, 400, mels);
        let transposed: Vec<f32> = (0..mels).flat_map(|m| (0..201).map(move |k| (m, k))).map(|(m, k)| want[k * mels + m]).collect();
        assert_close(&ours, &transposed, 1e-7, 1e-5, &format!("{mels} Slaney mel filters"));
    }
}

#[test]
fn encoder_and_decoder_match_pytorch_and_greedy_matches_hf() {
    let buf = export(&ExportOptions::default());
    let program = Program::load(buf.as_slice()).unwrap();
    let names = program.method_names();
    for m in ["preprocessor", "encoder", "text_decoder", "get_frames_per_window", "get_eos_id", "get_lang_codes"] {
        assert!(names.contains(&m), "{m} missing from {names:?}");
    }
    let reg = rbuild_kernels::registry();
    let getter = |name: &str| {
        let mut m = program.load_method(name, &reg, &BackendRegistry::new()).unwrap();
        m.execute(&mut KernelContext::default()).unwrap();
        m.output_value(0).cloned().unwrap()
    };
    assert!(matches!(getter("get_frames_per_window"), Value::Int(300)));
    assert!(matches!(getter("get_decoder_start_token_id"), Value::Int(505)));
    assert!(matches!(getter("get_eos_id"), Value::Int(504)));
    assert!(matches!(getter("get_no_speech_id"), Value::Int(510)));
    assert!(matches!(getter("get_lang_codes"), Value::Int(0x6e65)));
    assert!(!names.contains(&"get_timestamp_begin"), "the tiny vocabulary has no timestamp tokens");

    let dir = model_dir("whisper_tiny");
    let enc_io = Weights::open(&dir.join("encoder.io.safetensors")).unwrap();
    let features = enc_io.f32s("input.0", &[1, 80, 300]).unwrap();
    let mut enc = program.load_method("encoder", &reg, &BackendRegistry::new()).unwrap();
    let hidden = run_encoder(&mut enc, &features);
    assert_close(&hidden, &enc_io.f32s("output.0", &[1, 150, 64]).unwrap(), 1e-4, 1e-4, "encoder vs PyTorch");

    // Decoder: the 8 ids one call per token; row i of PyTorch's no-cache logits is step i.
    let dec_io = Weights::open(&dir.join("decoder.io.safetensors")).unwrap();
    let ids = longs(&dec_io.get("input.0", ScalarType::Long, &[1, 8]).unwrap().bytes());
    let memory = dec_io.f32s("input.1", &[1, 150, 64]).unwrap();
    let want = dec_io.f32s("output.0", &[1, 8, VOCAB]).unwrap();
    let mut dec = program.load_method("text_decoder", &reg, &BackendRegistry::new()).unwrap();
    for (i, &id) in ids.iter().enumerate() {
        let logits = decode(&mut dec, &[id], &memory, i as i64);
        assert_close(&logits, &want[i * VOCAB..(i + 1) * VOCAB], 1e-4, 1e-4, &format!("decoder step {i} vs PyTorch"));
    }
    // The same ids as one prefill call give the last row.
    let logits = decode(&mut dec, &ids, &memory, 0);
    assert_close(&logits, &want[7 * VOCAB..], 1e-4, 1e-4, "decoder prefill vs PyTorch");

    // Greedy from the prompt, on our own encoder output.
    let greedy = Weights::open(&dir.join("greedy.io.safetensors")).unwrap();
    let want_ids = longs(&greedy.get("output.0", ScalarType::Long, &[1, 20]).unwrap().bytes());
    let want_steps = greedy.f32s("output.2", &[1, 16, VOCAB]).unwrap();
    let hidden = run_encoder(&mut enc, &greedy.f32s("input.0", &[1, 80, 300]).unwrap());
    let mut logits = decode(&mut dec, &want_ids[..4], &hidden, 0);
    let mut got = Vec::new();
    for step in 0..16 {
        assert_close(&logits, &want_steps[step * VOCAB..(step + 1) * VOCAB], 1e-3, 1e-3, &format!("greedy step {step} logits"));
        let next = argmax(&logits);
        got.push(next);
        logits = decode(&mut dec, &[next], &hidden, 4 + step as i64);
    }
    assert_eq!(got, want_ids[4..], "greedy ids vs HF generate");
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("greedy.json")).unwrap()).unwrap();
    let hf: Vec<i64> = meta["hf_generate_sequences"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(got, hf, "greedy ids vs hf_generate_sequences");
}

#[test]
fn preprocessor_method_matches_the_feature_extractor() {
    let buf = export(&ExportOptions { max_audio_seconds: Some(SizeRequest::Exactly(10.0)), ..ExportOptions::default() });
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let a = audio();
    let wave = a.f32s("waveform", &[46537]).unwrap();
    // The runner's layout: the file, then one window (300 frames) of zeros.
    let mut pcm = wave.clone();
    pcm.resize(wave.len() + 300 * 160, 0.0);
    let mut m = program.load_method("preprocessor", &reg, &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[pcm.len()], &f32_bytes(&pcm)).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    let Some(Value::Tensor(t)) = m.output_value(0) else { panic!("no tensor output") };
    let frames = pcm.len() / 160;
    assert_eq!(t.shape.as_slice(), &[1, 80, frames]);
    let got = floats(m.output_bytes(0).unwrap());
    let want = a.f32s("mel80.first300", &[1, 80, 300]).unwrap();
    let first300: Vec<f32> = (0..80).flat_map(|mel| got[mel * frames..mel * frames + 300].to_vec()).collect();
    assert_close(&first300, &want, 1e-4, 0.0, "preprocessor features vs WhisperFeatureExtractor");

    // Audio longer than the program's limit is refused by the method's bounds.
    let too_long = vec![0f32; 10 * 16_000 + 300 * 160 + 1];
    assert!(m.set_input_tensor(0, ScalarType::Float, &[too_long.len()], &f32_bytes(&too_long)).is_err());
}

#[test]
fn config_errors_name_the_field() {
    let base = std::fs::read_to_string(model_dir("whisper_tiny").join("config.json")).unwrap();
    let bad = |from: &str, to: &str| {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{from} not in config.json");
        WhisperConfig::parse(&text, "config.json", None).unwrap_err().to_string()
    };
    assert!(bad("\"model_type\": \"whisper\"", "\"model_type\": \"llama\"").contains("model_type 'llama'"));
    assert!(bad("\"activation_function\": \"gelu\"", "\"activation_function\": \"relu\"").contains("activation_function 'relu'"));
    assert!(bad("\"d_model\": 64", "\"d_model\": 0").contains("d_model must be a positive integer"));
    assert!(bad("\"decoder_attention_heads\": 4", "\"decoder_attention_heads\": 5").contains("decoder_attention_heads 5"));
    assert!(bad("\"decoder_start_token_id\": 505", "\"decoder_start_token_id\": 9999").contains("decoder_start_token_id 9999 is outside"));
    let gen = std::fs::read_to_string(model_dir("whisper_tiny").join("generation_config.json")).unwrap();
    let c = WhisperConfig::parse(&base, "config.json", Some((&gen, "generation_config.json".into()))).unwrap();
    assert_eq!((c.ids.eos, c.ids.decoder_start, c.ids.no_timestamps, c.ids.transcribe), (504, 505, Some(511), Some(508)));
    assert_eq!(c.ids.languages, vec![("en".to_string(), 506)]);
    assert_eq!(c.frames_per_window(), 300);
    assert_eq!(c.timestamp_begin(), None);
}

#[test]
fn llama_programs_are_unchanged_by_the_family_interface() {
    // The family path and the direct builder emit the same bytes.
    let f = family::family("llama").unwrap();
    let o = ExportOptions { max_seq_len: Some(SizeRequest::Exactly(32)), ..ExportOptions::default() };
    let (bytes, _) = family::export(f, &Source::Checkpoint(model_dir("llama_tiny")), &o).unwrap();
    let (c, w) = rbuild_models::llama::open_checkpoint(&model_dir("llama_tiny")).unwrap();
    let p = rbuild_models::llama::build_kv(&c, &mut rbuild_models::Params::new(&w), &rbuild_models::llama::KvExport { max_seq_len: 32, full_logits: false }).unwrap();
    let mut g = p.graph;
    rbuild_export::passes::optimize_with(&mut g, &rbuild_export::passes::Options { decompose_linear: false, ..Default::default() }).unwrap();
    let mem = rbuild_export::plan::plan_memory(&g);
    let direct = rbuild_export::emit::emit_program(&[rbuild_export::emit::MethodSpec { name: "forward", graph: &g, plan: &mem }], &p.getters).unwrap();
    assert!(bytes == direct, "llama program bytes differ between the family export and the direct path");
}
