//! The generation loop against a scripted model: the calls it makes (prefill chunks, then one
//! token at the next position), EOS handling, budgets and errors.

use rbuild_llm_runner::generate::{check_budget, generate, GenConfig, Generation, Model, Stats};
use rbuild_runner_support::text::sampling::Sampler;

/// Next token = (last token + 1) % vocab; records every call.
struct Counter {
    vocab: usize,
    kv: bool,
    per_call: usize,
    calls: Vec<(Vec<u32>, usize)>,
    fail_at_call: Option<usize>,
}

impl Counter {
    fn new(kv: bool, per_call: usize) -> Counter {
        Counter { vocab: 50, kv, per_call, calls: Vec::new(), fail_at_call: None }
    }
}

impl Model for Counter {
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, String> {
        if self.fail_at_call == Some(self.calls.len()) {
            return Err("kernel failed".into());
        }
        self.calls.push((tokens.to_vec(), start_pos));
        let mut l = vec![0.0; self.vocab];
        l[(*tokens.last().unwrap() as usize + 1) % self.vocab] = 10.0;
        Ok(l)
    }
    fn uses_kv_cache(&self) -> bool {
        self.kv
    }
    fn max_tokens_per_call(&self) -> usize {
        self.per_call
    }
}

fn cfg(max_new: usize, eos: &[u32], ignore_eos: bool) -> GenConfig {
    GenConfig { max_new_tokens: max_new, max_context: 64, eos_ids: eos.to_vec(), ignore_eos }
}

fn run(m: &mut Counter, prompt: &[u32], c: &GenConfig) -> (Generation, Vec<u32>) {
    let mut seen = Vec::new();
    let mut greedy = Sampler::new(0.0, 1.0, 0);
    let g = generate(m, prompt, &mut greedy, c, &mut |t| {
        seen.push(t);
        Ok(())
    })
    .unwrap();
    (g, seen)
}

#[test]
fn kv_prefill_in_chunks_then_one_token_per_step() {
    let mut m = Counter::new(true, 4);
    let prompt: Vec<u32> = (1..=10).collect();
    let (g, seen) = run(&mut m, &prompt, &cfg(3, &[], false));
    assert_eq!(g.generated, vec![11, 12, 13]);
    assert_eq!(seen, g.generated);
    assert!(!g.hit_eos);
    let want: Vec<(Vec<u32>, usize)> = vec![
        (vec![1, 2, 3, 4], 0),
        (vec![5, 6, 7, 8], 4),
        (vec![9, 10], 8),
        (vec![11], 10),
        (vec![12], 11),
    ];
    // The last token is not fed back: nothing needs its logits.
    assert_eq!(m.calls, want);
}

#[test]
fn without_kv_cache_the_whole_sequence_is_fed_each_step() {
    let mut m = Counter::new(false, 16);
    let (g, _) = run(&mut m, &[5, 6], &cfg(3, &[], false));
    assert_eq!(g.generated, vec![7, 8, 9]);
    assert_eq!(m.calls, vec![(vec![5, 6], 0), (vec![5, 6, 7], 0), (vec![5, 6, 7, 8], 0)]);
}

#[test]
fn stops_at_eos_unless_ignored() {
    let mut m = Counter::new(true, 8);
    let (g, _) = run(&mut m, &[1, 2], &cfg(10, &[40, 5], false));
    assert_eq!(g.generated, vec![3, 4, 5]);
    assert!(g.hit_eos);
    let mut m = Counter::new(true, 8);
    let (g, _) = run(&mut m, &[1, 2], &cfg(6, &[5], true));
    assert_eq!(g.generated, vec![3, 4, 5, 6, 7, 8]);
    assert!(!g.hit_eos);
}

#[test]
fn budget_errors_say_the_numbers() {
    let e = check_budget(60, 10, 64).unwrap_err();
    assert!(e.contains("60") && e.contains("10") && e.contains("70") && e.contains("64") && e.contains("at most 4"), "{e}");
    assert!(check_budget(54, 10, 64).is_ok());
    assert!(check_budget(0, 1, 64).unwrap_err().contains("no tokens"));
    // generate refuses before calling the model.
    let mut m = Counter::new(true, 8);
    let mut s = Sampler::new(0.0, 1.0, 0);
    let prompt: Vec<u32> = (0..60).collect();
    let e = generate(&mut m, &prompt, &mut s, &cfg(10, &[], false), &mut |_| Ok(())).unwrap_err();
    assert!(e.contains("64"), "{e}");
    assert!(m.calls.is_empty());
}

#[test]
fn model_and_callback_errors_end_the_run() {
    let mut m = Counter::new(true, 8);
    m.fail_at_call = Some(2);
    let mut s = Sampler::new(0.0, 1.0, 0);
    let e = generate(&mut m, &[1], &mut s, &cfg(5, &[], false), &mut |_| Ok(())).unwrap_err();
    assert_eq!(e, "kernel failed");
    let mut m = Counter::new(true, 8);
    let mut n = 0;
    let e = generate(&mut m, &[1], &mut s, &cfg(5, &[], false), &mut |_| {
        n += 1;
        if n == 2 {
            Err("stdout closed".into())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!(e, "stdout closed");
}

#[test]
fn stats_rates_and_json() {
    use std::time::Duration;
    let g = Generation {
        generated: vec![1, 2, 3, 4, 5],
        prefill: Duration::from_millis(100),
        decode: Duration::from_millis(200),
        hit_eos: false,
    };
    let s = Stats::new(Duration::from_millis(30), 20, &g, Some(1 << 20));
    assert_eq!(s.prefill_tokens, 20);
    assert!((s.prefill_tok_s.unwrap() - 200.0).abs() < 1e-9);
    assert_eq!(s.decode_tokens, 4);
    assert!((s.decode_tok_s.unwrap() - 20.0).abs() < 1e-9);
    assert!((s.ttft_ms - 100.0).abs() < 1e-9);
    let j = s.to_json();
    for k in ["load_ms", "ttft_ms", "prefill_tokens", "prefill_tok_s", "decode_tokens", "decode_tok_s", "peak_rss_bytes"] {
        assert!(j.get(k).is_some(), "{k}");
    }
    let line = s.line();
    assert!(line.contains("200.0 tok/s") && line.contains("20.0 tok/s") && line.contains("1.0 MiB"), "{line}");
    // One token: no decode rate.
    let g1 = Generation { generated: vec![1], ..g };
    assert_eq!(Stats::new(Duration::ZERO, 3, &g1, None).decode_tok_s, None);
    assert!(rbuild_runner_support::stats::peak_rss_bytes().unwrap_or(1) > 0);
}
