//! The getter contract: required and optional getters, packed language codes, id checks.

use std::collections::HashMap;

use rbuild_asr_runner::program::{self, Getters};
use rbuild_runtime::Value;

fn table() -> HashMap<&'static str, Vec<Value>> {
    let int = |v: i64| vec![Value::Int(v)];
    let ints = |v: &[i64]| v.iter().map(|&x| Value::Int(x)).collect::<Vec<_>>();
    HashMap::from([
        ("get_sample_rate", int(16000)),
        ("get_n_mels", int(80)),
        ("get_n_fft", int(400)),
        ("get_hop_length", int(160)),
        ("get_frames_per_window", int(300)),
        ("get_max_audio_samples", int(160 * 300 * 4)),
        ("get_max_target_positions", int(64)),
        ("get_vocab_size", int(512)),
        ("get_eos_id", int(504)),
        ("get_decoder_start_token_id", int(505)),
        ("get_sot_prev_id", int(509)),
        ("get_no_speech_id", int(510)),
        ("get_no_timestamps_id", int(511)),
        ("get_transcribe_id", int(508)),
        ("get_translate_id", int(507)),
        ("get_lang_ids", ints(&[506, 400])),
        ("get_lang_codes", ints(&[0x6e65, 0x776168])),
        ("get_is_multilingual", vec![Value::Bool(true)]),
    ])
}

fn read(t: &HashMap<&'static str, Vec<Value>>) -> Result<program::Metadata, String> {
    let get = |n: &str| -> Result<Option<Vec<Value>>, String> { Ok(t.get(n).cloned()) };
    program::read_metadata(&Getters::new(&get))
}

#[test]
fn the_test_checkpoint_contract() {
    let m = read(&table()).unwrap();
    assert_eq!((m.sample_rate, m.n_mels, m.hop_length, m.frames_per_window), (16000, 80, 160, 300));
    assert_eq!(m.padding_samples(), 48000);
    let v = &m.vocab;
    assert_eq!((v.eot, v.sot, v.sot_prev, v.no_speech, v.no_timestamps), (504, 505, 509, 510, 511));
    assert_eq!((v.transcribe, v.translate), (Some(508), Some(507)));
    assert_eq!(v.lang_codes, vec!["en", "haw"]);
    assert_eq!(v.lang_id("haw"), Some(400));
    // Optional getters absent: no timestamps, nothing suppressed.
    assert_eq!(v.timestamp_begin, None);
    assert!(v.suppress.is_empty() && v.begin_suppress.is_empty());
    assert!(v.multilingual);
    assert_eq!(v.max_target_positions, 64);
}

#[test]
fn language_codes_pack_little_endian() {
    assert_eq!(program::pack_code("en"), 0x6e65);
    assert_eq!(program::pack_code("haw"), 0x776168);
    assert_eq!(program::unpack_code(0x776168).as_deref(), Some("haw"));
    assert_eq!(program::unpack_code(0), None);
    assert_eq!(program::unpack_code(0x0a0d), None);
}

#[test]
fn missing_required_getter_is_named() {
    for name in ["get_eos_id", "get_frames_per_window", "get_vocab_size", "get_no_timestamps_id"] {
        let mut t = table();
        t.remove(name);
        let e = read(&t).unwrap_err();
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn bad_values_are_rejected() {
    let mut t = table();
    t.insert("get_eos_id", vec![Value::Int(600)]);
    assert!(read(&t).unwrap_err().contains("get_eos_id"));
    let mut t = table();
    t.insert("get_lang_codes", vec![Value::Int(0x6e65)]);
    assert!(read(&t).unwrap_err().contains("get_lang_codes"));
    let mut t = table();
    t.insert("get_hop_length", vec![Value::Bool(true)]);
    assert!(read(&t).unwrap_err().contains("get_hop_length"));
    let mut t = table();
    t.insert("get_max_audio_samples", vec![Value::Int(1000)]);
    assert!(read(&t).unwrap_err().contains("get_max_audio_samples"));
}

#[test]
fn optional_lists_and_language_choice() {
    let mut t = table();
    t.insert("get_timestamp_begin", vec![Value::Int(450)]);
    t.insert("get_suppress_tokens", vec![Value::Int(1), Value::Int(2)]);
    t.insert("get_begin_suppress_tokens", vec![Value::Int(220), Value::Int(504)]);
    let v = read(&t).unwrap().vocab;
    assert_eq!(v.timestamp_begin, Some(450));
    assert_eq!(v.suppress, vec![1, 2]);
    assert_eq!(v.begin_suppress, vec![220, 504]);
    assert_eq!(v.resolve_language("haw"), Ok(Some(400)));
    assert_eq!(v.resolve_language("auto"), Ok(None));
    let e = v.resolve_language("xx").unwrap_err();
    assert!(e.contains("xx") && e.contains("en, haw"), "{e}");
    let en_only = rbuild_asr_runner::decode::Vocab { multilingual: false, ..v.clone() };
    assert_eq!(en_only.resolve_language("en"), Ok(None));
    assert!(en_only.resolve_language("de").unwrap_err().contains("English-only"));
    // English-only: no task, so translation is refused and the task getters may be absent.
    use rbuild_asr_runner::decode::Task;
    assert_eq!(en_only.check_task(Task::Transcribe), Ok(()));
    assert!(en_only.check_task(Task::Translate).unwrap_err().contains("English-only model"));
    assert_eq!(v.check_task(Task::Translate), Ok(()));
}

/// An English-only Whisper program (openai-whisper's `*.en`: no language or task tokens in its
/// prompts; HF's generation config names no task ids) loads without task getters.
#[test]
fn english_only_programs_need_no_task_getters() {
    let mut t = table();
    for name in ["get_transcribe_id", "get_translate_id", "get_lang_ids", "get_lang_codes"] {
        t.remove(name);
    }
    t.insert("get_is_multilingual", vec![Value::Bool(false)]);
    let v = read(&t).unwrap().vocab;
    assert!(!v.multilingual && v.transcribe.is_none() && v.translate.is_none());
    let prompt: Vec<u32> = rbuild_asr_runner::decode::prompt_head(&v, &[]).into_iter().chain(rbuild_asr_runner::decode::prompt_tail(&v, None, rbuild_asr_runner::decode::Task::Transcribe, false)).collect();
    assert_eq!(prompt, vec![v.sot, v.no_timestamps], "<|startoftranscript|><|notimestamps|>, as openai-whisper's English-only models");
}
