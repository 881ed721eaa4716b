//! Logits → ranked class probabilities.

/// Softmax in f64 (max-subtracted, so large logits cannot overflow).
pub fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let exp: Vec<f64> = logits.iter().map(|&v| (v as f64 - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

/// The `k` highest entries as (index, value), highest first; ties keep the lower index first.
/// NaNs rank last.
pub fn top_k(values: &[f64], k: usize) -> Vec<(usize, f64)> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    let key = |i: usize| if values[i].is_nan() { f64::NEG_INFINITY } else { values[i] };
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    order.into_iter().take(k).map(|i| (i, values[i])).collect()
}

/// Labels from a text file's lines (trailing blank lines ignored).
pub fn parse_labels(text: &str) -> Vec<String> {
    let mut labels: Vec<String> = text.lines().map(|l| l.trim_end_matches('\r').to_string()).collect();
    while labels.last().is_some_and(|l| l.trim().is_empty()) {
        labels.pop();
    }
    labels
}
