//! Word error rate of a Whisper program over a folder of `NAME.wav` files with `NAME.txt`
//! transcripts: each file transcribed as the `asr` runner does by default (English, greedy with
//! openai-whisper's temperature fallback, long-form windows), both texts normalized with
//! Whisper's English normalizer, and the word errors summed over the folder.

use std::path::{Path, PathBuf};

use rbuild_asr_runner::program::WhisperProgram;
use rbuild_asr_runner::tokenizer::{self, Text};
use rbuild_asr_runner::transcribe::{self, Geometry, Options};
use rbuild_runner_support::audio;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelRegistry, Program};

use crate::normalize::normalize_english;
use crate::wer::{word_errors, WordErrors};

/// One recording and its transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    pub audio: PathBuf,
    pub transcript: PathBuf,
}

/// What one file scored.
#[derive(Clone, Debug, PartialEq)]
pub struct FileResult {
    pub audio: PathBuf,
    /// Normalized reference and hypothesis.
    pub reference: String,
    pub hypothesis: String,
    pub errors: WordErrors,
}

/// Every `*.wav` in `dir` (sorted) with its `.txt` beside it; a WAV without one is an error.
pub fn scan(dir: &Path) -> Result<Vec<Recording>, String> {
    let read = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut wavs = Vec::new();
    for entry in read {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_file() && path.extension().is_some_and(|x| x.eq_ignore_ascii_case("wav")) {
            wavs.push(path);
        }
    }
    wavs.sort();
    if wavs.is_empty() {
        return Err(format!("{}: no .wav files (expected NAME.wav with its transcript NAME.txt)", dir.display()));
    }
    wavs.into_iter()
        .map(|audio| {
            let transcript = audio.with_extension("txt");
            if transcript.is_file() {
                Ok(Recording { audio, transcript })
            } else {
                Err(format!("{}: no transcript {} beside it", audio.display(), transcript.display()))
            }
        })
        .collect()
}

/// Transcribes every recording with the program's Whisper methods and scores it.
pub fn evaluate(
    program: &Program<'_>,
    kernels: &KernelRegistry,
    backends: &BackendRegistry,
    tokenizer_path: &Path,
    recordings: &[Recording],
    threads: usize,
) -> Result<Vec<FileResult>, String> {
    let mut model = WhisperProgram::load(program, kernels, backends, threads).map_err(|e| format!("not a Whisper program: {e}"))?;
    let vocab = model.meta.vocab.clone();
    let tok = tokenizer::load(tokenizer_path)?;
    tokenizer::check_matches(tok.as_ref(), &vocab).map_err(|e| format!("{}: {e}", tokenizer_path.display()))?;
    let text = Text { tokenizer: Some(tok), eot: vocab.eot, vocab_size: vocab.vocab_size };
    let opts = Options { language: vocab.resolve_language("en")?, ..Options::default() };
    let mut results = Vec::new();
    for r in recordings {
        let at = |e: String| format!("{}: {e}", r.audio.display());
        let reference = std::fs::read_to_string(&r.transcript).map_err(|e| format!("{}: {e}", r.transcript.display()))?;
        let wav = audio::read_wav(&r.audio)?;
        let rate = model.meta.sample_rate;
        let pcm = audio::resample(&wav.samples, wav.sample_rate, rate).map_err(at)?;
        let content_frames = model.compute_features(&pcm).map_err(at)?;
        let geo = Geometry { content_frames, frames_per_window: model.meta.frames_per_window, frame_seconds: model.meta.frame_seconds() };
        let transcript = transcribe::transcribe(&mut model, &vocab, geo, &opts, &text, &mut |_| Ok(()), &mut |_, _, _| {}).map_err(at)?;
        let said: String = transcript.segments.iter().map(|s| s.text.as_str()).collect();
        let (reference, hypothesis) = (normalize_english(&reference), normalize_english(&said));
        let errors = word_errors(&reference.split_whitespace().collect::<Vec<_>>(), &hypothesis.split_whitespace().collect::<Vec<_>>());
        results.push(FileResult { audio: r.audio.clone(), reference: reference.trim().to_string(), hypothesis: hypothesis.trim().to_string(), errors });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_pair_with_transcripts() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.wav", "b.txt", "a.WAV", "a.txt", "notes.md"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let found = scan(dir.path()).unwrap();
        let names: Vec<String> = found.iter().map(|r| r.audio.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["a.WAV", "b.wav"]);
        assert_eq!(found[1].transcript, dir.path().join("b.txt"));
        std::fs::write(dir.path().join("c.wav"), b"x").unwrap();
        assert!(scan(dir.path()).unwrap_err().contains("c.wav: no transcript"));
        let empty = tempfile::tempdir().unwrap();
        assert!(scan(empty.path()).unwrap_err().contains("no .wav files"));
    }
}
