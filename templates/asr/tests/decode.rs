//! openai-whisper's decoding rules on a fake decoder: prompt, suppression, timestamp rules,
//! language detection, no-speech probability, log probabilities and budgets.

mod common;
use common::*;

use rbuild_asr_runner::decode::{self, apply_filters, DecodeOptions, Rng, Task};

fn opts(timestamps: bool) -> DecodeOptions {
    DecodeOptions {
        task: Task::Transcribe,
        language: Some(EN),
        timestamps,
        temperature: 0.0,
        max_new_tokens: None,
        max_initial_timestamp: Some(50),
    }
}

fn banned(l: &[f32]) -> Vec<u32> {
    (0..l.len() as u32).filter(|&i| l[i as usize] == f32::NEG_INFINITY).collect()
}

#[test]
fn always_suppressed_tokens() {
    let mut l = flat();
    apply_filters(&mut l, &[3], &vocab(), &opts(false));
    // Without --timestamps the timestamp tokens are banned too (whisper.cpp's rule).
    let mut want = vec![7, SOT, TRANSLATE, TRANSCRIBE, SOT_PREV, NO_SPEECH];
    want.extend(TB..VOCAB as u32);
    assert_eq!(banned(&l), want);
    // The sot token is banned even when it has the largest logit.
    let mut l = one_hot(SOT, 20.0);
    l[9] = 1.0;
    apply_filters(&mut l, &[3], &vocab(), &opts(false));
    assert_eq!(decode::argmax(&l), 9);
}

#[test]
fn begin_suppress_only_at_the_first_step() {
    let mut first = flat();
    apply_filters(&mut first, &[], &vocab(), &opts(false));
    assert!(first[0] == f32::NEG_INFINITY && first[EOT as usize] == f32::NEG_INFINITY);
    let mut later = flat();
    apply_filters(&mut later, &[5], &vocab(), &opts(false));
    assert!(later[0] == 0.0 && later[EOT as usize] == 0.0);
}

#[test]
fn first_sampled_token_is_a_timestamp_at_most_one_second() {
    let mut l = one_hot(4, 30.0);
    apply_filters(&mut l, &[], &vocab(), &opts(true));
    let allowed: Vec<u32> = (0..VOCAB as u32).filter(|&i| l[i as usize] > f32::NEG_INFINITY).collect();
    assert_eq!(allowed, (TB..=TB + 50).collect::<Vec<_>>());
    assert_eq!(l[NO_TIMESTAMPS as usize], f32::NEG_INFINITY);
}

#[test]
fn timestamps_pair_up_and_never_decrease() {
    let v = vocab();
    // After text then one timestamp (an open segment end): no text, timestamps ≥ it.
    let mut l = one_hot(EOT, 8.0);
    apply_filters(&mut l, &[TB, 3, TB + 10], &v, &opts(true));
    assert!((0..EOT).all(|t| l[t as usize] == f32::NEG_INFINITY), "text after a single timestamp");
    assert_eq!(l[EOT as usize], 8.0, "the end may follow");
    assert!((TB..TB + 10).all(|t| l[t as usize] == f32::NEG_INFINITY));
    assert_eq!(l[(TB + 10) as usize], 0.0, "the pair's second timestamp may repeat the first");
    // After a closed pair: no timestamp at all.
    let mut l = flat();
    apply_filters(&mut l, &[TB, 3, TB + 10, TB + 10], &v, &opts(true));
    assert!((TB..VOCAB as u32).all(|t| l[t as usize] == f32::NEG_INFINITY));
    assert_eq!(l[3], 0.0);
    // After text following a pair: timestamps strictly after the last one.
    let mut l = flat();
    apply_filters(&mut l, &[TB, 3, TB + 10, TB + 10, 4], &v, &opts(true));
    assert!((TB..=TB + 10).all(|t| l[t as usize] == f32::NEG_INFINITY));
    assert_eq!(l[(TB + 11) as usize], 0.0);
    // Without --timestamps none of this applies: no timestamp at all, text stays.
    let mut l = flat();
    apply_filters(&mut l, &[TB, 3, TB + 10, TB + 10], &v, &opts(false));
    assert!((TB..VOCAB as u32).all(|t| l[t as usize] == f32::NEG_INFINITY));
    assert_eq!(l[3], 0.0);
}

#[test]
fn timestamp_forced_when_their_total_probability_wins() {
    let v = vocab();
    // One text token at 3.0 against 151 timestamps at 0: e^3 ≈ 20 < 151, the timestamps win.
    let mut l = one_hot(5, 3.0);
    apply_filters(&mut l, &[TB, 4], &v, &opts(true));
    assert_eq!(l[5], f32::NEG_INFINITY, "text banned");
    assert!(decode::argmax(&l) as u32 >= TB);
    // At 6.0 (e^6 ≈ 403 > 150 remaining timestamps), the text token stays.
    let mut l = one_hot(5, 6.0);
    apply_filters(&mut l, &[TB, 4], &v, &opts(true));
    assert_eq!(decode::argmax(&l), 5);
}

#[test]
fn greedy_window_positions_and_logprobs() {
    let mut m = Fake::scripted(vec![3, 9, 12]);
    let r = decode::decode_window(&mut m, &vocab(), &opts(false), &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.tokens, vec![3, 9, 12]);
    assert!(r.hit_eot);
    assert_eq!(r.prompt, vec![SOT, EN, TRANSCRIBE, NO_TIMESTAMPS]);
    // sot alone first (no-speech and language), then the rest of the prompt, then one token
    // per step at the next position.
    let calls: Vec<(Vec<u32>, usize)> = m.calls.clone();
    assert_eq!(
        calls,
        vec![
            (vec![SOT], 0),
            (vec![EN, TRANSCRIBE, NO_TIMESTAMPS], 1),
            (vec![3], 4),
            (vec![9], 5),
            (vec![12], 6)
        ]
    );
    // Each chosen token: logit 10 against VOCAB-1 zeros (some banned); eot included, as
    // openai-whisper sums it and divides by n + 1.
    let lp = |n_allowed: usize| 10.0 - (10f64.exp() + (n_allowed - 1) as f64).ln();
    // 7, transcribe, translate, sot, sot_prev, nospeech and (no --timestamps) every timestamp
    // banned.
    let n_allowed = VOCAB - 6 - (VOCAB - TB as usize);
    let first = n_allowed - 2; // and the begin-suppressed 0 and eot
    let want = lp(first) + 3.0 * lp(n_allowed);
    assert!((r.sum_logprob - want).abs() < 1e-9, "{} vs {want}", r.sum_logprob);
    assert!((r.avg_logprob - want / 4.0).abs() < 1e-9);
}

#[test]
fn no_speech_probability_is_the_softmax_at_sot() {
    let mut m = Fake::new(|c| match c.sampled {
        Some(s) => one_hot(if s.is_empty() { 3 } else { EOT }, 10.0),
        None => one_hot(NO_SPEECH, 5.0),
    });
    let r = decode::decode_window(&mut m, &vocab(), &opts(false), &[], &mut Rng::new(0)).unwrap();
    let want = 5f64.exp() / (5f64.exp() + (VOCAB - 1) as f64);
    assert!((r.no_speech_prob - want).abs() < 1e-9);
    assert_eq!(r.tokens, vec![3]);
    assert!(r.hit_eot);
}

#[test]
fn language_detected_among_language_tokens_only() {
    // A text token beats every language at sot; among languages, de wins.
    let mut m = Fake::new(|c| match c.sampled {
        Some(_) => one_hot(EOT, 10.0),
        None => {
            let mut l = one_hot(4, 9.0);
            l[EN as usize] = 1.0;
            l[DE as usize] = 2.0;
            l
        }
    });
    let o = DecodeOptions { language: None, ..opts(false) };
    let r = decode::decode_window(&mut m, &vocab(), &o, &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.language, Some(DE));
    assert_eq!(r.prompt, vec![SOT, DE, TRANSCRIBE, NO_TIMESTAMPS]);
    // Translation swaps the task token.
    let o = DecodeOptions { task: Task::Translate, ..opts(false) };
    let r = decode::decode_window(&mut Fake::scripted(vec![]), &vocab(), &o, &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.prompt, vec![SOT, EN, TRANSLATE, NO_TIMESTAMPS]);
}

#[test]
fn english_only_prompt_has_no_language_or_task() {
    let v = rbuild_asr_runner::decode::Vocab { multilingual: false, ..vocab() };
    let p = decode::prompt_tail(&v, None, Task::Transcribe, false);
    assert_eq!(p, vec![NO_TIMESTAMPS]);
    assert_eq!(decode::prompt_tail(&v, None, Task::Transcribe, true), Vec::<u32>::new());
}

#[test]
fn previous_text_prompt_keeps_the_last_half_context() {
    let v = vocab();
    let prev: Vec<u32> = (0..40).map(|i| i % 50).collect();
    let head = decode::prompt_head(&v, &prev);
    // max_target_positions 64 → 31 previous tokens.
    assert_eq!(head.len(), 1 + 31 + 1);
    assert_eq!(head[0], SOT_PREV);
    assert_eq!(&head[1..32], &prev[9..]);
    assert_eq!(*head.last().unwrap(), SOT);
    assert_eq!(decode::prompt_head(&v, &[]), vec![SOT]);
}

#[test]
fn budgets_stop_decoding() {
    let script: Vec<u32> = (1..49).collect();
    let o = DecodeOptions { max_new_tokens: Some(5), ..opts(false) };
    let r = decode::decode_window(&mut Fake::scripted(script.clone()), &vocab(), &o, &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.tokens, vec![1, 2, 3, 4, 5]);
    assert!(!r.hit_eot);
    // The context (64) minus the 4-token prompt.
    let r = decode::decode_window(&mut Fake::scripted(script), &vocab(), &opts(false), &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.tokens.len(), 48);
    let long: Vec<u32> = (0..100).map(|i| 1 + i % 40).collect();
    let r = decode::decode_window(&mut Fake::scripted(long), &vocab(), &opts(false), &[], &mut Rng::new(0)).unwrap();
    assert_eq!(r.tokens.len(), 60);
}

#[test]
fn sampling_is_seeded_and_follows_the_distribution() {
    let mut l = flat();
    l[3] = 2f32.ln();
    l[4] = 0.0;
    for (i, v) in l.iter_mut().enumerate() {
        if i != 3 && i != 4 {
            *v = f32::NEG_INFINITY;
        }
    }
    let draw = |seed| {
        let mut rng = Rng::new(seed);
        (0..3000).map(|_| decode::sample(&l, 1.0, &mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
    let threes = draw(5).iter().filter(|&&t| t == 3).count() as f64 / 3000.0;
    assert!((threes - 2.0 / 3.0).abs() < 0.03, "{threes}");
    assert_eq!(decode::sample(&l, 0.0, &mut Rng::new(0)), 3);
}

#[test]
fn compression_ratio_flags_repetition() {
    let varied = b"The quick brown fox jumps over the lazy dog.";
    assert!(decode::compression_ratio(varied) < 1.5);
    let repetitive = "the the the the ".repeat(20);
    assert!(decode::compression_ratio(repetitive.as_bytes()) > 2.4);
}
