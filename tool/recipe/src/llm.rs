//! A language model's settings (`model "llama" { max-seq-len …; group-size …; … }`): the
//! fields only language and speech models take, and their decoding from a `model` block.

use std::path::{Path, PathBuf};

use kdl::KdlNode;

use crate::choice::Choice;
use crate::decode::{Decoder, Fields, Parent};
use crate::paths::{resolve_file, PathUse};
use crate::recipe::Rejection;
use crate::size_request::{self, SizeRequest};

/// Settings of a language model (`Catalog::language_models`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmSpec {
    /// The longest sequence (prompt plus generated tokens): the KV cache length. The build
    /// checks it against the checkpoint (see [`SizeRequest`]).
    pub max_seq_len: SizeRequest<usize>,
    /// Elements per quantization group for `int4`/`8da4w` linears and 4-bit embeddings
    /// (ignored otherwise); one of [`LlmSpec::GROUP_SIZES`].
    pub group_size: usize,
    pub embedding_quantize: EmbeddingQuantize,
    /// A tokenizer file for the runner (resolved like weights paths).
    pub tokenizer: Option<PathBuf>,
    /// Speech models: the longest audio (seconds) the program's front end accepts; None = the
    /// family's default.
    pub max_audio_seconds: Option<SizeRequest<u32>>,
    /// Return logits for every position instead of only the last one.
    pub full_logits: bool,
}

impl LlmSpec {
    /// Group sizes the 4-bit kernels support.
    pub const GROUP_SIZES: &'static [usize] = &[32, 64, 128, 256];
    pub const DEFAULT_GROUP_SIZE: usize = 32;
    pub const MAX_SEQ_LEN: usize = 1_000_000;
    /// The longest `max-audio-seconds` (24 hours).
    pub const MAX_AUDIO_SECONDS: u32 = 86_400;
}

/// How a language model's token embedding table is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingQuantize {
    None,
    Int8,
    Int4,
}

impl Choice for EmbeddingQuantize {
    const WHAT: &'static str = "embedding quantization";
    const ALL: &'static [(&'static str, Self)] =
        &[("none", EmbeddingQuantize::None), ("int8", EmbeddingQuantize::Int8), ("int4", EmbeddingQuantize::Int4)];
}

/// The `model` fields only language models take.
pub(crate) const LLM_ONLY: &[&str] = &["max-seq-len", "group-size", "embedding-quantize", "tokenizer", "full-logits", "max-audio-seconds"];

/// The language-model fields of a `model` block; relative paths are resolved against `base`.
pub(crate) fn decode(d: &mut Decoder, node: &KdlNode, fields: &Fields, base: &Path) -> Option<LlmSpec> {
    let max_seq_len = d
        .require(fields, Parent::Node(node), "max-seq-len", "`max-seq-len 128`")
        .and_then(|n| size_request::decode(d, n, 1, LlmSpec::MAX_SEQ_LEN as i128))
        .map(|n| n.value.map(|v| v as usize));
    let group_size = match fields.get("group-size") {
        Some(n) => d.int(n, 1, i128::from(u32::MAX)).and_then(|g| match check_group_size(g.value) {
            Ok(g) => Some(g),
            Err(r) => {
                d.report(r.at(d.source, g.span));
                None
            }
        }),
        None => Some(LlmSpec::DEFAULT_GROUP_SIZE),
    };
    let embedding_quantize = match fields.get("embedding-quantize") {
        Some(n) => d.string(n).and_then(|s| d.choice(&s)),
        None => Some(EmbeddingQuantize::None),
    };
    let tokenizer = match fields.get("tokenizer") {
        Some(n) => d.string(n).and_then(|t| match resolve_file(&t.value, base) {
            Ok(path) => Some(Some(path)),
            Err(e) => {
                d.report(e.problem(d.source, t.span, "the recipe's folder", PathUse::Tokenizer));
                None
            }
        }),
        None => Some(None),
    };
    let full_logits = match fields.get("full-logits") {
        Some(n) => d.boolean(n),
        None => Some(false),
    };
    let max_audio_seconds = match fields.get("max-audio-seconds") {
        Some(n) => size_request::decode(d, n, 1, i128::from(LlmSpec::MAX_AUDIO_SECONDS)).map(|n| Some(n.value.map(|v| v as u32))),
        None => Some(None),
    };
    Some(LlmSpec {
        max_audio_seconds: max_audio_seconds?,
        max_seq_len: max_seq_len?,
        group_size: group_size?,
        embedding_quantize: embedding_quantize?,
        tokenizer: tokenizer?,
        full_logits: full_logits?,
    })
}

pub(crate) fn check_group_size(n: i128) -> Result<usize, Rejection> {
    match LlmSpec::GROUP_SIZES.iter().find(|&&g| g as i128 == n) {
        Some(&g) => Ok(g),
        None => Err(Rejection {
            message: format!("`group-size` must be 32, 64, 128 or 256, found {n}"),
            label: "not a supported group size",
            help: "the 4-bit kernels take groups of 32, 64, 128 or 256 elements (default 32)".into(),
        }),
    }
}
