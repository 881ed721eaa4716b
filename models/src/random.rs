//! Deterministic, well-conditioned random state dicts with torchvision's names and shapes, for
//! tests and benchmarks without downloaded weights.
//!
//! The model itself lists its parameters: it is built once with [`Params::random`], which
//! invents each tensor on first request, so names and shapes cannot drift from the model code.

use rbuild_export::error::Result;
use rbuild_runtime::ScalarType;

use crate::params::{Init, Params};
use crate::Weights;

/// SplitMix64 with Box–Muller normals: tiny, fast and identical on every platform.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    spare: Option<f64>,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed, spare: None }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal.
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 - u lies in (0, 1], so the log is finite.
        let r = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let theta = std::f64::consts::TAU * self.uniform();
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }

    fn normals(&mut self, n: usize, std: f64) -> Vec<f32> {
        (0..n).map(|_| (self.normal() * std) as f32).collect()
    }

    fn uniforms(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * self.uniform()) as f32).collect()
    }

    /// `n` values drawn for a parameter of kind `init`.
    pub fn init(&mut self, init: Init, n: usize) -> Vec<f32> {
        match init {
            Init::ConvWeight { fan_in } => self.normals(n, (2.0 / fan_in.max(1) as f64).sqrt()),
            Init::ConvBias => self.normals(n, 0.1),
            Init::LinearWeight { fan_in } => self.normals(n, 1.0 / (fan_in.max(1) as f64).sqrt()),
            Init::LinearBias => self.normals(n, 0.01),
            Init::BnGamma => self.uniforms(n, 0.6, 1.4),
            Init::BnBeta | Init::BnMean => self.normals(n, 0.1),
            Init::BnVar => self.uniforms(n, 0.5, 1.5),
        }
    }
}

/// Extra gain on the final Linear so logits land at O(1-10) rather than O(0.1-1): the pooled
/// features feeding it are non-negative-ish activations with RMS around 1.
const LOGIT_GAIN: f32 = 3.0;

/// A random state dict for model `name` (see [`crate::names`]); the same seed gives identical
/// bytes.
pub fn random_weights(name: &str, seed: u64) -> Result<Weights> {
    let model = crate::model(name)?;
    let mut b = rbuild_export::GraphBuilder::new();
    let x = b.input("input", rbuild_export::TensorMeta::fixed(ScalarType::Float, &[1, 3, 224, 224]));
    let mut p = Params::random(seed);
    (model.build)(&mut b, &mut p, x)?;
    let mut w = p.into_weights();
    let shape = w.shape(model.classifier).map(<[usize]>::to_vec).unwrap_or_default();
    let scaled: Vec<u8> = w.f32s(model.classifier, &shape)?.iter().flat_map(|v| (v * LOGIT_GAIN).to_le_bytes()).collect();
    w.insert(model.classifier, ScalarType::Float, &shape, scaled);
    Ok(w)
}
