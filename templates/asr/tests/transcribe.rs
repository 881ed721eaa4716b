//! Long-form transcription on a fake model: windows and seeks, segments split at timestamp
//! pairs, previous-text prompts, temperature fallback, silent windows, clamped times.

mod common;
use common::*;

use std::collections::HashMap;

use rbuild_asr_runner::tokenizer::Text;
use rbuild_asr_runner::transcribe::{self, Geometry, Options, Segment, Transcript};

/// 100 frames (1 s) per window; timestamps every 2 frames.
fn geo(content_frames: usize) -> Geometry {
    Geometry { content_frames, frames_per_window: 100, frame_seconds: 0.01 }
}

fn text() -> Text {
    Text { tokenizer: None, eot: EOT, vocab_size: VOCAB }
}

fn options(timestamps: bool) -> Options {
    Options { language: Some(EN), timestamps, ..Options::default() }
}

/// A fake whose window at frame `w` emits `scripts[w]` (then eot).
fn per_window(scripts: HashMap<usize, Vec<u32>>) -> Fake {
    Fake::new(move |c| match c.sampled {
        Some(s) => one_hot(*scripts.get(&c.window).and_then(|v| v.get(s.len())).unwrap_or(&EOT), 10.0),
        None => flat(),
    })
}

fn run(m: &mut Fake, g: Geometry, o: &Options) -> (Transcript, Vec<Segment>) {
    let mut streamed = Vec::new();
    let mut progress = Vec::new();
    let t = transcribe::transcribe(
        m,
        &vocab(),
        g,
        o,
        &text(),
        &mut |s| {
            streamed.push(s.clone());
            Ok(())
        },
        &mut |k, n, t| progress.push((k, n, t)),
    )
    .unwrap();
    assert_eq!(progress.len(), t.windows);
    assert!(progress.iter().enumerate().all(|(i, p)| p.0 == i + 1 && p.1 >= p.0));
    assert_eq!(streamed, t.segments, "every segment streamed as decoded");
    (t, streamed)
}

fn times(t: &Transcript) -> Vec<(f64, f64)> {
    t.segments.iter().map(|s| (s.start, s.end)).collect()
}

fn assert_times(got: &[(f64, f64)], want: &[(f64, f64)]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-9, "{got:?} vs {want:?}");
    }
}

fn assert_inside_and_increasing(t: &Transcript, duration: f64) {
    let mut prev_end = 0.0;
    for s in &t.segments {
        assert!(s.start >= prev_end && s.end > s.start && s.end <= duration + 1e-9, "{:?}", times(t));
        prev_end = s.end;
    }
}

#[test]
fn windows_without_timestamps_one_segment_each() {
    let mut m = per_window(HashMap::from([(0, vec![1, 2]), (100, vec![3, 4]), (200, vec![5])]));
    let (t, _) = run(&mut m, geo(250), &options(false));
    assert_eq!(m.windows, vec![0, 100, 200]);
    assert_times(&times(&t), &[(0.0, 1.0), (1.0, 2.0), (2.0, 2.5)]);
    assert_eq!(t.segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), vec![" 1 2", " 3 4", " 5"]);
    // Each window is prompted with the text before it.
    let first: Vec<&Vec<u32>> = m.prompts.iter().map(|(_, p)| p).collect();
    assert_eq!(first[0], &vec![SOT, EN, TRANSCRIBE, NO_TIMESTAMPS]);
    assert_eq!(first[1], &vec![SOT_PREV, 1, 2, SOT, EN, TRANSCRIBE, NO_TIMESTAMPS]);
    assert_eq!(first[2], &vec![SOT_PREV, 1, 2, 3, 4, SOT, EN, TRANSCRIBE, NO_TIMESTAMPS]);
    assert_inside_and_increasing(&t, 2.5);

    // --no-context: every prompt starts at sot.
    let mut m = per_window(HashMap::from([(0, vec![1, 2]), (100, vec![3, 4]), (200, vec![5])]));
    let o = Options { condition_on_previous_text: false, ..options(false) };
    run(&mut m, geo(250), &o);
    assert!(m.prompts.iter().all(|(_, p)| p[0] == SOT));
}

#[test]
fn timestamps_split_segments_and_seek_to_the_last_one() {
    let mut m = per_window(HashMap::from([
        // Two closed pairs: seek to the last timestamp (0.60 s = 60 frames).
        (0, vec![TB, 1, TB + 20, TB + 20, 2, TB + 30, TB + 30]),
        // Ends with a single timestamp: seek past the whole window.
        (60, vec![TB, 3, TB + 10, TB + 10, 4, TB + 25]),
        // No pair: one segment ending at its last timestamp.
        (160, vec![TB, 5, TB + 40]),
    ]));
    let (t, _) = run(&mut m, geo(250), &options(true));
    assert_eq!(m.windows, vec![0, 60, 160]);
    assert_times(&times(&t), &[(0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.1), (1.6, 2.4)]);
    assert_eq!(t.segments[1].tokens, vec![TB + 20, 2, TB + 30]);
    assert_eq!(t.segments[1].text, " 2");
    // With timestamps the prompt has no <|notimestamps|>, and the previous text is the
    // segments' tokens, timestamps included.
    assert_eq!(m.prompts[0].1, vec![SOT, EN, TRANSCRIBE]);
    assert_eq!(m.prompts[1].1[..8], [SOT_PREV, TB, 1, TB + 20, TB + 20, 2, TB + 30, SOT]);
    assert_inside_and_increasing(&t, 2.5);
}

#[test]
fn times_are_clamped_inside_the_audio() {
    let mut m = per_window(HashMap::from([(0, vec![TB, 1, TB + 50]), (100, vec![TB, 2, TB + 45])]));
    let (t, _) = run(&mut m, geo(150), &options(true));
    assert_times(&times(&t), &[(0.0, 1.0), (1.0, 1.5)]);
    assert_inside_and_increasing(&t, 1.5);
}

#[test]
fn a_timestamp_at_zero_cannot_stall_the_seek() {
    let (pieces, advance) = transcribe::split(&[TB, 1, TB, TB], &vocab(), geo(500), 0, 100);
    assert_eq!(pieces.len(), 1);
    assert_eq!(advance, 100);
}

#[test]
fn repetitive_text_falls_back_to_a_higher_temperature() {
    let m0: Vec<u32> = vec![5; 40];
    let m1: Vec<u32> = (10..30).collect();
    let mut m = Fake::new(move |c| match c.sampled {
        Some(s) => {
            let script = if c.attempt == 0 { &m0 } else { &m1 };
            one_hot(*script.get(s.len()).unwrap_or(&EOT), 10.0)
        }
        None => flat(),
    });
    let (t, _) = run(&mut m, geo(100), &options(false));
    assert_eq!(t.fallbacks, 1);
    assert_eq!(t.segments.len(), 1);
    let s = &t.segments[0];
    assert_eq!(s.tokens, (10..30).collect::<Vec<u32>>());
    assert_eq!(s.temperature, 0.2);
    assert!(s.compression_ratio < 2.4);
}

#[test]
fn unlikely_text_tries_every_temperature_then_drops_the_context() {
    // Window 0 is noise at every temperature (avg logprob ≈ −5); window 100 is clean.
    let mut m = Fake::new(|c| match (c.window, c.sampled) {
        (0, _) => flat(),
        (_, Some(s)) => one_hot(if s.is_empty() { 3 } else { EOT }, 10.0),
        (_, None) => flat(),
    });
    let (t, _) = run(&mut m, geo(200), &options(false));
    assert_eq!(t.fallbacks, 5, "0.2, 0.4, 0.6, 0.8, 1.0 after 0");
    assert!(!t.segments.is_empty());
    assert_eq!(t.segments[0].temperature, 1.0);
    // Decoded at a temperature above 0.5: the next window is not conditioned on it.
    let w1: Vec<&Vec<u32>> = m.prompts.iter().filter(|(w, _)| *w == 100).map(|(_, p)| p).collect();
    assert_eq!(w1[0][0], SOT);
    assert_eq!(t.segments.last().unwrap().tokens, vec![3]);
}

#[test]
fn silent_windows_are_skipped() {
    // Window 0: <|nospeech|> dominates at sot and the text is unlikely → skipped, no retry.
    let mut m = Fake::new(|c| match (c.window, c.sampled) {
        (0, Some(_)) => flat(),
        (0, None) => one_hot(NO_SPEECH, 10.0),
        (_, Some(s)) => one_hot(if s.is_empty() { 3 } else { EOT }, 10.0),
        (_, None) => flat(),
    });
    let (t, _) = run(&mut m, geo(200), &options(false));
    assert_eq!(t.skipped_windows, 1);
    assert_eq!(t.fallbacks, 0);
    assert_times(&times(&t), &[(1.0, 2.0)]);
    assert_eq!(m.windows, vec![0, 100]);

    // The same no-speech probability with confident text is kept.
    let mut m = Fake::new(|c| match c.sampled {
        Some(s) => one_hot(if s.is_empty() { 3 } else { EOT }, 10.0),
        None => one_hot(NO_SPEECH, 10.0),
    });
    let (t, _) = run(&mut m, geo(100), &options(false));
    assert_eq!(t.skipped_windows, 0);
    assert_eq!(t.segments.len(), 1);
    assert!(t.segments[0].no_speech_prob > 0.6);
}

#[test]
fn language_detected_once_on_the_first_window() {
    let mut m = Fake::new(|c| match (c.window, c.sampled) {
        (_, Some(s)) => one_hot(if s.is_empty() { 3 } else { EOT }, 10.0),
        // Window 0 says German; later windows would say English.
        (0, None) => one_hot(DE, 5.0),
        (_, None) => one_hot(EN, 5.0),
    });
    let o = Options { language: None, ..options(false) };
    let (t, _) = run(&mut m, geo(200), &o);
    assert_eq!(t.language, Some(DE));
    assert!(m.prompts.iter().all(|(_, p)| p.contains(&DE) && !p.contains(&EN)));
}

#[test]
fn timestamps_need_timestamp_tokens() {
    let v = rbuild_asr_runner::decode::Vocab { timestamp_begin: None, ..vocab() };
    let mut m = Fake::scripted(vec![1]);
    let e = transcribe::transcribe(&mut m, &v, geo(100), &options(true), &text(), &mut |_| Ok(()), &mut |_, _, _| {})
        .unwrap_err();
    assert!(e.contains("timestamp"), "{e}");
}

#[test]
fn fallback_temperatures() {
    assert_eq!(transcribe::fallback_temperatures(0.0, 0.2), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
    assert_eq!(transcribe::fallback_temperatures(0.5, 0.2), vec![0.5, 0.7, 0.9]);
    assert_eq!(transcribe::fallback_temperatures(0.3, 0.0), vec![0.3]);
}
