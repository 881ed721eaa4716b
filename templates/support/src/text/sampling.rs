//! Next-token selection: argmax at temperature 0, otherwise softmax(logits / T) restricted to
//! the top-p nucleus, drawn from a seeded PRNG so a run is reproducible given `--seed`.

/// xoshiro256** seeded through splitmix64 (a seed of 0 is fine).
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The index of the largest logit; ties go to the lowest index, NaNs never win. An empty or
/// all-NaN slice gives 0.
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_v = f32::NEG_INFINITY;
    let mut found = false;
    for (i, &v) in logits.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if !found || v > best_v {
            best = i;
            best_v = v;
            found = true;
        }
    }
    best
}

#[derive(Clone, Debug)]
pub struct Sampler {
    pub temperature: f32,
    pub top_p: f32,
    rng: Rng,
}

impl Sampler {
    /// `temperature` ≥ 0 (0 = greedy); `top_p` in (0, 1] (1 = the whole distribution).
    pub fn new(temperature: f32, top_p: f32, seed: u64) -> Sampler {
        Sampler { temperature, top_p, rng: Rng::new(seed) }
    }

    pub fn sample(&mut self, logits: &[f32]) -> usize {
        if self.temperature <= 0.0 || !self.temperature.is_finite() {
            return argmax(logits);
        }
        let probs = softmax_scaled(logits, self.temperature);
        let Some(probs) = probs else {
            // No finite logit at all: nothing to sample from, fall back to the greedy rule.
            return argmax(logits);
        };
        let u = self.rng.next_f64();
        sample_top_p(&probs, self.top_p, u)
    }
}

/// softmax(logits / t) in f64 (NaN and -inf logits get probability 0); None when no logit is
/// finite.
pub fn softmax_scaled(logits: &[f32], t: f32) -> Option<Vec<f64>> {
    let t = t as f64;
    let max = logits.iter().filter(|v| v.is_finite()).fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    if !max.is_finite() {
        return None;
    }
    let mut p: Vec<f64> =
        logits.iter().map(|&v| if v.is_finite() { ((v as f64 - max) / t).exp() } else { 0.0 }).collect();
    let sum: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= sum);
    Some(p)
}

/// Draws an index from the smallest set of most probable entries whose mass reaches `top_p`
/// (ties ordered by lower index; at least one entry is always kept), renormalized, using the
/// uniform variate `u` ∈ [0, 1).
pub fn sample_top_p(probs: &[f64], top_p: f32, u: f64) -> usize {
    let top_p = top_p as f64;
    let mut order: Vec<usize> = if top_p >= 1.0 {
        (0..probs.len()).filter(|&i| probs[i] > 0.0).collect()
    } else {
        // An entry below (1 - p) / (n - 1) cannot be in the nucleus: even with every other
        // entry that small, the others already sum past p. Skipping them avoids sorting the
        // whole vocabulary.
        let n = probs.len().max(2) as f64;
        let cutoff = (1.0 - top_p) / (n - 1.0);
        let mut o: Vec<usize> = (0..probs.len()).filter(|&i| probs[i] >= cutoff && probs[i] > 0.0).collect();
        if o.is_empty() {
            o = (0..probs.len()).filter(|&i| probs[i] > 0.0).collect();
        }
        o
    };
    if order.is_empty() {
        return 0;
    }
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    let mut kept = order.len();
    if top_p < 1.0 {
        let mut cum = 0.0;
        for (k, &i) in order.iter().enumerate() {
            cum += probs[i];
            if cum >= top_p {
                kept = k + 1;
                break;
            }
        }
    }
    let order = &order[..kept];
    let mass: f64 = order.iter().map(|&i| probs[i]).sum();
    let target = u * mass;
    let mut cum = 0.0;
    for &i in order {
        cum += probs[i];
        if target < cum {
            return i;
        }
    }
    // Rounding left target at or past the last partial sum.
    *order.last().unwrap_or(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_ties_lowest_and_skips_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, -1.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    #[test]
    fn rng_is_deterministic_and_uniformish() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        let mut r = Rng::new(7);
        let n = 20000;
        let mean: f64 = (0..n).map(|_| r.next_f64()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }
}
