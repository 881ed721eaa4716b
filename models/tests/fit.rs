//! Each family fits an export's sizes to the shared tiny checkpoints: a default the model
//! cannot hold is lowered with a note naming both values, an exact value it cannot hold is an
//! error naming the value and the limit, and values it holds stay as asked.

mod common;

use common::model_dir;
use rbuild_models::family::{self, ExportOptions, Fitted, SizeRequest, Source};

fn fit(family: &str, model: &str, o: &ExportOptions) -> Result<Fitted, String> {
    let f = family::family(family).unwrap();
    f.fit(&Source::Checkpoint(model_dir(model)), o).map_err(|e| e.to_string())
}

fn sizes(max_seq_len: Option<SizeRequest<usize>>, max_audio_seconds: Option<SizeRequest<f64>>) -> ExportOptions {
    ExportOptions { max_seq_len, max_audio_seconds, ..ExportOptions::default() }
}

fn notes(fitted: &Fitted, whose: &str) -> Vec<String> {
    fitted.lowered.iter().map(|l| l.describe(whose)).collect()
}

#[test]
fn voxtral_defaults_are_lowered_to_the_checkpoint() {
    // voxtral_tiny: 256 positions, 40 audio tokens per 3.2 s chunk.
    let recipe = sizes(Some(SizeRequest::UpTo(1024)), Some(SizeRequest::UpTo(60.0)));
    let fitted = fit("voxtral", "voxtral_tiny", &recipe).unwrap();
    assert_eq!((fitted.max_seq_len, fitted.max_audio_seconds), (256, None), "as many chunks as 256 tokens hold");
    assert_eq!(
        notes(&fitted, "recipe default"),
        [
            "max-seq-len 1024 (recipe default) lowered to 256, the model's max_position_embeddings",
            "max-audio-seconds 60 (recipe default) lowered to 19.2, what max-seq-len 256 holds (6 chunks of 40 audio tokens)",
        ]
    );
    // The family's own default (1024) likewise.
    let fitted = fit("voxtral", "voxtral_tiny", &ExportOptions::default()).unwrap();
    assert_eq!(fitted.max_seq_len, 256);
    assert_eq!(notes(&fitted, "default"), ["max-seq-len 1024 (default) lowered to 256, the model's max_position_embeddings"]);
    // An exact audio length the lowered cache holds stays.
    let fitted = fit("voxtral", "voxtral_tiny", &sizes(Some(SizeRequest::UpTo(1024)), Some(SizeRequest::Exactly(6.0)))).unwrap();
    assert_eq!((fitted.max_seq_len, fitted.max_audio_seconds, fitted.lowered.len()), (256, Some(6.0), 1));
}

#[test]
fn voxtral_exact_values_the_checkpoint_cannot_hold_fail() {
    let e = fit("voxtral", "voxtral_tiny", &sizes(Some(SizeRequest::Exactly(1024)), Some(SizeRequest::UpTo(60.0)))).unwrap_err();
    assert!(e.contains("max_seq_len 1024 exceeds the model's max_position_embeddings 256"), "{e}");
    let e = fit("voxtral", "voxtral_tiny", &sizes(Some(SizeRequest::UpTo(1024)), Some(SizeRequest::Exactly(60.0)))).unwrap_err();
    assert!(e.contains("max_audio_seconds 60 needs 19 chunks of 40 audio tokens, more than max_seq_len 256 holds"), "{e}");
    // A cache too short for one chunk fails whoever chose it.
    let e = fit("voxtral", "voxtral_tiny", &sizes(Some(SizeRequest::Exactly(32)), None)).unwrap_err();
    assert!(e.contains("max_seq_len 32 is shorter than one chunk of audio (40 tokens)"), "{e}");
}

#[test]
fn llama_defaults_are_lowered_and_exact_values_checked() {
    // llama_tiny: 256 positions; the family's default, 128, fits.
    let fitted = fit("llama", "llama_tiny", &ExportOptions::default()).unwrap();
    assert_eq!((fitted.max_seq_len, fitted.lowered.len()), (128, 0));
    let fitted = fit("llama", "llama_tiny", &sizes(Some(SizeRequest::UpTo(1024)), None)).unwrap();
    assert_eq!(fitted.max_seq_len, 256);
    assert_eq!(notes(&fitted, "recipe default"), ["max-seq-len 1024 (recipe default) lowered to 256, the model's max_position_embeddings"]);
    let e = fit("llama", "llama_tiny", &sizes(Some(SizeRequest::Exactly(1024)), None)).unwrap_err();
    assert!(e.contains("max_seq_len 1024 exceeds the model's max_position_embeddings 256"), "{e}");
    assert_eq!(fit("llama", "llama_tiny", &sizes(Some(SizeRequest::Exactly(256)), None)).unwrap().max_seq_len, 256);
}

#[test]
fn whisper_defaults_are_lowered_and_exact_values_checked() {
    // whisper_tiny: 64 decoder positions; by default the cache is all of them.
    let fitted = fit("whisper", "whisper_tiny", &ExportOptions::default()).unwrap();
    assert_eq!((fitted.max_seq_len, fitted.max_audio_seconds, fitted.lowered.len()), (64, Some(600.0), 0));
    let fitted = fit("whisper", "whisper_tiny", &sizes(Some(SizeRequest::UpTo(448)), Some(SizeRequest::UpTo(600.0)))).unwrap();
    assert_eq!(fitted.max_seq_len, 64);
    assert_eq!(notes(&fitted, "recipe default"), ["max-seq-len 448 (recipe default) lowered to 64, the decoder's max_target_positions"]);
    let e = fit("whisper", "whisper_tiny", &sizes(Some(SizeRequest::Exactly(448)), None)).unwrap_err();
    assert!(e.contains("max_seq_len 448 exceeds the decoder's max_target_positions 64"), "{e}");
    // Audio has no model limit: the runner walks any file window by window.
    let fitted = fit("whisper", "whisper_tiny", &sizes(None, Some(SizeRequest::Exactly(86_400.0)))).unwrap();
    assert_eq!(fitted.max_audio_seconds, Some(86_400.0));
}

#[test]
fn the_export_notes_a_lowered_default_and_builds_the_fitted_sizes() {
    let f = family::family("voxtral").unwrap();
    let (_, report) = family::export(f, &Source::Checkpoint(model_dir("voxtral_tiny")), &ExportOptions::default()).unwrap();
    assert!(report.notes.iter().any(|n| n == "max-seq-len 1024 (default) lowered to 256, the model's max_position_embeddings"), "{:?}", report.notes);
    // Exporting the fitted sizes again fits nothing: no note.
    let fitted = fit("voxtral", "voxtral_tiny", &ExportOptions::default()).unwrap();
    let again = ExportOptions::default().with_sizes(&fitted);
    assert_eq!(again.max_seq_len, Some(SizeRequest::Exactly(256)));
    assert!(fit("voxtral", "voxtral_tiny", &again).unwrap().lowered.is_empty());
}
