//! Rotary position embedding tables in HF's layout (`cat(freqs, freqs)`, rotate_half).

use super::config::Llama3Scaling;

/// HF's inverse frequencies, in float32 as HF computes them, with Llama 3.1's rescaling when
/// the config asks for it (`_compute_llama3_parameters`).
pub fn inv_freq(head_dim: usize, theta: f64, scaling: Option<&Llama3Scaling>) -> Vec<f32> {
    let half = head_dim / 2;
    let base: Vec<f32> = (0..half)
        .map(|i| {
            let exponent = (2 * i) as f32 / head_dim as f32;
            1.0f32 / (theta as f32).powf(exponent)
        })
        .collect();
    let Some(s) = scaling else { return base };
    let (factor, low, high, old) =
        (s.factor as f32, s.low_freq_factor as f32, s.high_freq_factor as f32, s.original_max_position_embeddings as f32);
    let low_wavelen = old / low;
    let high_wavelen = old / high;
    base.iter()
        .map(|&f| {
            let wavelen = 2.0 * core::f32::consts::PI / f;
            let scaled = if wavelen > low_wavelen { f / factor } else { f };
            let medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
            if medium {
                let smooth = (old / wavelen - low) / (high - low);
                (1.0 - smooth) * scaled / factor + smooth * scaled
            } else {
                scaled
            }
        })
        .collect()
}

/// cos/sin tables for positions `0..len`, each [len, head_dim]. `freqs = inv_freq * pos` is
/// rounded to float32 as in HF; cos/sin are taken in f64 and rounded once.
pub fn tables(inv_freq: &[f32], len: usize) -> (Vec<f32>, Vec<f32>) {
    let half = inv_freq.len();
    let head_dim = 2 * half;
    let (mut cos, mut sin) = (Vec::with_capacity(len * head_dim), Vec::with_capacity(len * head_dim));
    for pos in 0..len {
        for j in 0..head_dim {
            let angle = inv_freq[j % half] * pos as f32;
            cos.push((angle as f64).cos() as f32);
            sin.push((angle as f64).sin() as f32);
        }
    }
    (cos, sin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_scaling_keeps_high_frequencies_and_divides_low_ones() {
        let s = Llama3Scaling { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192.0 };
        let plain = inv_freq(128, 500000.0, None);
        let scaled = inv_freq(128, 500000.0, Some(&s));
        // Wavelength below 8192/4: unchanged; above 8192: divided by the factor; between: blended.
        assert_eq!(scaled[0], plain[0]);
        let last = plain.len() - 1;
        assert!((scaled[last] - plain[last] / 8.0).abs() <= 1e-12 + plain[last] * 1e-6);
        for (a, b) in scaled.iter().zip(&plain) {
            assert!(*a <= *b && *a >= *b / 8.0 * (1.0 - 1e-6));
        }
    }
}
