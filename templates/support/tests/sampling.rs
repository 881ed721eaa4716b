//! Sampling: greedy ties, seeded determinism, the top-p nucleus boundary and degenerate logits.

use rbuild_runner_support::text::sampling::{argmax, sample_top_p, softmax_scaled, Sampler};

#[test]
fn temperature_zero_is_argmax_with_lowest_id_on_ties() {
    let mut s = Sampler::new(0.0, 0.9, 1);
    assert_eq!(s.sample(&[0.5, 2.0, -1.0, 2.0]), 1);
    assert_eq!(s.sample(&[f32::NAN, 1.0, 1.0]), 1);
    assert_eq!(argmax(&[3.0, 3.0, 3.0]), 0);
}

#[test]
fn same_seed_same_tokens_other_seed_other_tokens() {
    let logits: Vec<f32> = (0..64).map(|i| ((i * 37 % 64) as f32 / 16.0).sin()).collect();
    let draw = |seed| {
        let mut s = Sampler::new(1.0, 1.0, seed);
        (0..200).map(|_| s.sample(&logits)).collect::<Vec<_>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

#[test]
fn full_distribution_frequencies_match_softmax() {
    let logits = [1.0f32, 0.0, 2.0, -1.0];
    let p = softmax_scaled(&logits, 0.5).unwrap();
    let mut s = Sampler::new(0.5, 1.0, 123);
    let n = 40_000;
    let mut counts = [0usize; 4];
    for _ in 0..n {
        counts[s.sample(&logits)] += 1;
    }
    for i in 0..4 {
        let f = counts[i] as f64 / n as f64;
        // 5 standard deviations of a binomial proportion.
        let tol = 5.0 * (p[i] * (1.0 - p[i]) / n as f64).sqrt() + 1e-4;
        assert!((f - p[i]).abs() <= tol, "token {i}: {f} vs {}", p[i]);
    }
}

#[test]
fn nucleus_keeps_the_smallest_prefix_reaching_top_p() {
    let probs = [0.2, 0.5, 0.3];
    // Sorted: 1 (0.5), 2 (0.3), 0 (0.2). top_p 0.75 keeps {1, 2}: mass 0.8.
    assert_eq!(sample_top_p(&probs, 0.75, 0.0), 1);
    assert_eq!(sample_top_p(&probs, 0.75, 0.6), 1); // 0.6 * 0.8 = 0.48 < 0.5
    assert_eq!(sample_top_p(&probs, 0.75, 0.99), 2); // never 0
    // top_p 0.5 is reached by the first token alone.
    for u in [0.0, 0.5, 0.999] {
        assert_eq!(sample_top_p(&probs, 0.5, u), 1);
    }
    // A tiny top_p still keeps one token.
    assert_eq!(sample_top_p(&probs, 1e-9, 0.9), 1);
    // top_p 1 keeps all: u near 1 lands on the least likely.
    assert_eq!(sample_top_p(&probs, 1.0, 0.999), 0);
    // Ties in probability: the lower id comes first.
    assert_eq!(sample_top_p(&[0.25, 0.25, 0.25, 0.25], 0.25, 0.7), 0);
    assert_eq!(sample_top_p(&[0.25, 0.25, 0.25, 0.25], 0.5, 0.7), 1);
}

#[test]
fn nucleus_cutoff_matches_full_sort() {
    // The pre-filter must not change the result: compare with a plain sort-everything nucleus.
    let logits: Vec<f32> = (0..500).map(|i| ((i * 7919 % 500) as f32 / 40.0).cos() * 4.0).collect();
    let probs = softmax_scaled(&logits, 0.8).unwrap();
    for &top_p in &[0.1f32, 0.5, 0.9, 0.95, 0.999] {
        let mut order: Vec<usize> = (0..probs.len()).collect();
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        let mut cum = 0.0;
        let mut kept = order.len();
        for (k, &i) in order.iter().enumerate() {
            cum += probs[i];
            if cum >= top_p as f64 {
                kept = k + 1;
                break;
            }
        }
        let mass: f64 = order[..kept].iter().map(|&i| probs[i]).sum();
        for step in 0..50 {
            let u = step as f64 / 50.0 + 0.003;
            let target = u * mass;
            let mut c = 0.0;
            let mut want = order[kept - 1];
            for &i in &order[..kept] {
                c += probs[i];
                if target < c {
                    want = i;
                    break;
                }
            }
            assert_eq!(sample_top_p(&probs, top_p, u), want, "top_p {top_p} u {u}");
        }
    }
}

#[test]
fn degenerate_logits_do_not_panic() {
    let mut s = Sampler::new(1.0, 0.9, 9);
    // Only one finite logit: always chosen.
    for _ in 0..20 {
        assert_eq!(s.sample(&[f32::NEG_INFINITY, 3.0, f32::NAN]), 1);
    }
    // Nothing finite: the greedy fallback.
    assert_eq!(s.sample(&[f32::NAN, f32::NAN]), 0);
    assert_eq!(s.sample(&[f32::NEG_INFINITY; 3]), 0);
    // Huge logits do not overflow.
    let i = s.sample(&[1e30, -1e30]);
    assert_eq!(i, 0);
}
