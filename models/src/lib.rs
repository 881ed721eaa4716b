//! Model definitions: Rust functions that describe a model on a [`GraphBuilder`] from a
//! state dict ([`Weights`]), and a registry building them by name.

pub mod config_json;
pub mod family;
pub mod fit;
pub mod gguf_tokenizer;
pub mod hf_checkpoint;
pub mod llama;
pub mod mobilenet_v2;
pub mod mobilenet_v3;
pub mod params;
pub mod random;
pub mod tokenizer_json;
pub mod voxtral;
pub mod whisper;

pub use rbuild_export::weights::Weights;
pub use rbuild_export::GraphBuilder;

use rbuild_export::error::Result;
use rbuild_export::{ExportError, Graph, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

pub use mobilenet_v3::Variant;
pub use params::Params;
pub use random::random_weights;

/// A registered model: how to build it and where its class count is read from.
pub struct Model {
    pub name: &'static str,
    /// Appends the model on an image input and returns its logits.
    pub build: fn(&mut GraphBuilder, &mut Params, ValueId) -> Result<ValueId>,
    /// The final Linear weight ([num_classes, features]).
    pub classifier: &'static str,
}

const MODELS: &[Model] = &[
    Model { name: "mobilenet_v2", build: mobilenet_v2::build, classifier: mobilenet_v2::CLASSIFIER },
    Model {
        name: "mobilenet_v3_small",
        build: |b, p, x| mobilenet_v3::build(b, p, x, Variant::Small),
        classifier: mobilenet_v3::CLASSIFIER,
    },
    Model {
        name: "mobilenet_v3_large",
        build: |b, p, x| mobilenet_v3::build(b, p, x, Variant::Large),
        classifier: mobilenet_v3::CLASSIFIER,
    },
];

/// Names accepted by [`build`] and [`random_weights`], in registry order.
pub fn names() -> &'static [&'static str] {
    &["mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"]
}

/// The registered model `name`, or an error listing the known ones.
pub fn model(name: &str) -> Result<&'static Model> {
    MODELS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| {
            if language_models().contains(&name) {
                return ExportError::Invalid(format!("'{name}' is a sequence-model family, not an image model: export it through rbuild_models::family"));
            }
            ExportError::Invalid(format!(
                "unknown model '{name}'; known models: {}, {}",
                names().join(", "),
                language_models().join(", ")
            ))
        })
}

/// Builds model `name` from `w` for a float32 NCHW input of `input_shape`; the graph's one
/// output is the logits [N, num_classes]. Every tensor in `w` (other than BatchNorm's
/// `num_batches_tracked`) must be consumed, so a file of another architecture is rejected.
pub fn build(name: &str, w: &Weights, input_shape: &[usize]) -> Result<Graph> {
    let model = model(name)?;
    if input_shape.len() != 4 || input_shape[1] != 3 || input_shape.contains(&0) {
        return Err(ExportError::Invalid(format!("{name} takes a non-empty [N, 3, H, W] image, got input shape {input_shape:?}")));
    }
    let mut b = GraphBuilder::new();
    let x = b.input("input", TensorMeta::fixed(ScalarType::Float, input_shape));
    let mut p = Params::new(w);
    let logits = (model.build)(&mut b, &mut p, x)?;
    p.check_all_used(name)?;
    b.output(logits);
    Ok(b.finish())
}

/// Sequence-model families (token ids, audio), exported through [`family`].
pub fn language_models() -> &'static [&'static str] {
    &["llama", "voxtral", "whisper"]
}

/// Builds a Llama-family checkpoint folder as the Core-ATen full-sequence forward: int64 ids
/// [1, seq_len] → float32 logits [1, seq_len, vocab], no KV cache.
pub fn build_llama(dir: &std::path::Path, seq_len: usize) -> Result<Graph> {
    let (c, w) = llama::open_checkpoint(dir)?;
    llama::build(&c, &w, seq_len)
}
