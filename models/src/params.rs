//! Parameter loading shared by the models: every tensor a model reads goes through [`Params`],
//! which checks its shape, records that it was consumed (so leftovers in a weights file can be
//! reported) and, in generating mode, draws it at random (see [`crate::random`]).

use std::collections::BTreeSet;

use rbuild_export::error::Result;
use rbuild_export::{ExportError, GraphBuilder, ValueId};
use rbuild_runtime::ScalarType;

use crate::random::Rng;
use crate::Weights;

/// How a parameter is initialised when generated (see [`crate::random`]).
#[derive(Clone, Copy, Debug)]
pub enum Init {
    /// He-normal: std sqrt(2 / fan_in).
    ConvWeight {
        fan_in: usize,
    },
    ConvBias,
    /// std 1 / sqrt(fan_in).
    LinearWeight {
        fan_in: usize,
    },
    LinearBias,
    BnGamma,
    BnBeta,
    BnMean,
    BnVar,
}

/// A model's view of its state dict.
pub struct Params {
    weights: Weights,
    used: BTreeSet<String>,
    /// Set when parameters are generated rather than read.
    rng: Option<Rng>,
    /// Prepended to every name a model asks for: a family that nests another family's
    /// modules (Voxtral's `language_model.`, `audio_tower.`) reuses its builders as they are.
    prefix: String,
}

impl Params {
    /// Reads parameters from `w` (cheap: tensors are shared, not copied).
    pub fn new(w: &Weights) -> Self {
        Params { weights: w.clone(), used: BTreeSet::new(), rng: None, prefix: String::new() }
    }

    /// Generates every parameter the model asks for from `seed`.
    pub fn random(seed: u64) -> Self {
        let mut weights = Weights::default();
        weights.source = format!("random weights (seed {seed})");
        Params { weights, used: BTreeSet::new(), rng: Some(Rng::new(seed)), prefix: String::new() }
    }

    pub fn is_random(&self) -> bool {
        self.rng.is_some()
    }

    /// Sets the name prefix (see the field) and returns the previous one.
    pub fn set_prefix(&mut self, prefix: &str) -> String {
        std::mem::replace(&mut self.prefix, prefix.to_string())
    }

    /// Whether the file holds `name` (under the current prefix).
    pub fn contains(&self, name: &str) -> bool {
        self.weights.contains(&self.full_name(name))
    }

    fn full_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    pub fn into_weights(self) -> Weights {
        self.weights
    }

    /// Shape of a tensor in the file, or a weight error naming it.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        let name = self.full_name(name);
        self.weights
            .shape(&name)
            .ok_or_else(|| ExportError::Weight { name, message: format!("missing from {}", self.weights.source) })
    }

    /// Loads (or generates) a float32 tensor of exactly `shape` as a graph constant.
    pub fn tensor(&mut self, b: &mut GraphBuilder, name: &str, shape: &[usize], init: Init) -> Result<ValueId> {
        let full = self.full_name(name);
        let name = full.as_str();
        if let Some(rng) = &mut self.rng {
            if !self.weights.contains(name) {
                let values = rng.init(init, shape.iter().product());
                self.weights.insert(name, ScalarType::Float, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect());
            }
        }
        let data = self.weights.get_f32(name, shape)?;
        self.used.insert(name.to_string());
        b.constant(name, ScalarType::Float, shape, data)
    }

    /// A generated parameter whose values the model computes itself (e.g. sinusoidal
    /// positions), recorded like a drawn one so the random weights can be saved.
    pub fn insert_f32(&mut self, b: &mut GraphBuilder, name: &str, shape: &[usize], values: &[f32]) -> Result<ValueId> {
        let full = self.full_name(name);
        let name = full.as_str();
        if !self.weights.contains(name) {
            self.weights.insert(name, ScalarType::Float, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect());
        }
        let data = self.weights.get_f32(name, shape)?;
        self.used.insert(name.to_string());
        b.constant(name, ScalarType::Float, shape, data)
    }

    /// Tensors in the file that the model never read; `num_batches_tracked` (training-only
    /// BatchNorm state) does not count.
    pub fn unused(&self) -> Vec<&str> {
        self.weights.names().into_iter().filter(|n| !self.used.contains(*n) && !n.ends_with("num_batches_tracked")).collect()
    }

    /// Errors when the file holds tensors the model did not consume: most likely weights of a
    /// different architecture or configuration.
    pub fn check_all_used(&self, model: &str) -> Result<()> {
        let unused = self.unused();
        if unused.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = unused.iter().take(8).copied().collect();
        let more = if unused.len() > shown.len() { format!(" and {} more", unused.len() - shown.len()) } else { String::new() };
        Err(ExportError::Invalid(format!(
            "{}: {} tensor(s) not used by {model} (weights of another architecture?): {}{more}",
            self.weights.source,
            unused.len(),
            shown.join(", ")
        )))
    }
}

/// The activation after a conv + batch norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    None,
    Relu,
    Relu6,
    Hardswish,
}

pub fn activation(b: &mut GraphBuilder, x: ValueId, act: Act) -> Result<ValueId> {
    match act {
        Act::None => Ok(x),
        Act::Relu => b.relu(x),
        Act::Relu6 => b.relu6(x),
        Act::Hardswish => b.hardswish(x),
    }
}

/// A bias-free square convolution's geometry; padding is `(k - 1) / 2` ("same" for odd k).
#[derive(Clone, Copy, Debug)]
pub struct Conv {
    pub cin: usize,
    pub cout: usize,
    pub k: usize,
    pub stride: usize,
    pub groups: usize,
}

impl Conv {
    pub fn pointwise(cin: usize, cout: usize) -> Self {
        Conv { cin, cout, k: 1, stride: 1, groups: 1 }
    }

    pub fn depthwise(c: usize, k: usize, stride: usize) -> Self {
        Conv { cin: c, cout: c, k, stride, groups: c }
    }
}

/// torchvision's `Conv2dNormActivation` named `module`: conv `{module}.0`, BatchNorm
/// `{module}.1`, then the activation (which has no parameters).
pub fn conv_norm_act(b: &mut GraphBuilder, p: &mut Params, x: ValueId, module: &str, c: Conv, eps: f64, act: Act) -> Result<ValueId> {
    conv_bn(b, p, x, (&format!("{module}.0"), &format!("{module}.1")), c, eps, act)
}

/// torchvision's `Conv2dNormActivation` (and a bare conv + BN pair) under the module names
/// `(conv, bn)`: conv weight `{conv}.weight`, BatchNorm `{bn}.{weight,bias,running_mean,running_var}`.
pub fn conv_bn(b: &mut GraphBuilder, p: &mut Params, x: ValueId, (conv, bn): (&str, &str), c: Conv, eps: f64, act: Act) -> Result<ValueId> {
    let per_group = c.cin / c.groups.max(1);
    let w = p.tensor(b, &format!("{conv}.weight"), &[c.cout, per_group, c.k, c.k], Init::ConvWeight { fan_in: per_group * c.k * c.k })?;
    let y = b.conv2d(x, w, None, c.stride, (c.k - 1) / 2, 1, c.groups)?;
    let y = batch_norm(b, p, y, bn, c.cout, eps)?;
    activation(b, y, act)
}

/// Inference BatchNorm2d with torchvision's parameter names under `prefix`.
pub fn batch_norm(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, c: usize, eps: f64) -> Result<ValueId> {
    let gamma = p.tensor(b, &format!("{prefix}.weight"), &[c], Init::BnGamma)?;
    let beta = p.tensor(b, &format!("{prefix}.bias"), &[c], Init::BnBeta)?;
    let mean = p.tensor(b, &format!("{prefix}.running_mean"), &[c], Init::BnMean)?;
    let var = p.tensor(b, &format!("{prefix}.running_var"), &[c], Init::BnVar)?;
    b.batch_norm(x, Some(gamma), Some(beta), mean, var, eps)
}

/// A 1x1 convolution with bias (the squeeze-excitation `fc` layers).
pub fn conv1x1_bias(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, cin: usize, cout: usize) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{prefix}.weight"), &[cout, cin, 1, 1], Init::ConvWeight { fan_in: cin })?;
    let bias = p.tensor(b, &format!("{prefix}.bias"), &[cout], Init::ConvBias)?;
    b.conv2d(x, w, Some(bias), 1, 0, 1, 1)
}

/// `nn.Linear(cin, cout)` under `prefix`.
pub fn linear(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, cin: usize, cout: usize) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{prefix}.weight"), &[cout, cin], Init::LinearWeight { fan_in: cin })?;
    let bias = p.tensor(b, &format!("{prefix}.bias"), &[cout], Init::LinearBias)?;
    b.linear(x, w, Some(bias))
}

/// Classifier width: the first dimension of a Linear weight in the file (1000 for generated
/// weights, ImageNet's class count).
pub fn num_classes(p: &Params, weight: &str) -> Result<usize> {
    if p.is_random() && !p.weights().contains(weight) {
        return Ok(1000);
    }
    match p.shape(weight)? {
        [n, _] if *n > 0 => Ok(*n),
        s => Err(ExportError::Weight {
            name: weight.into(),
            message: format!("is {s:?}, a classifier weight must be [num_classes, features]"),
        }),
    }
}
