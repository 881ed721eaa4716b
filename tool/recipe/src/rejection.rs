//! Settings that are well-formed but not allowed where they are, with the message, label and
//! help each one gets.

use miette::SourceSpan;

use crate::diag::{Problem, Source};
use crate::recipe::Catalog;

/// A setting that is well-formed but not allowed where it is; placed at a span by [`Rejection::at`].
pub(crate) struct Rejection {
    pub message: String,
    pub label: &'static str,
    pub help: String,
}

impl Rejection {
    pub(crate) fn at(self, source: &Source, span: SourceSpan) -> Problem {
        source.problem(span, self.message, self.label).help(self.help)
    }
}

/// `field` set for image model `arch`.
pub(crate) fn language_only(field: &str, arch: &str, catalog: &Catalog) -> Rejection {
    let listed: Vec<String> = catalog.language_models.iter().map(|m| format!("`{m}`")).collect();
    let listed = if listed.is_empty() { "none in this build".to_string() } else { listed.join(", ") };
    Rejection {
        message: format!("`{field}` applies to language models only"),
        label: "not for image models",
        help: format!("`{arch}` is an image model: remove `{field}` (language models: {listed})"),
    }
}

/// `input-shape` set for language model `arch`.
pub(crate) fn no_input_shape(arch: &str) -> Rejection {
    Rejection {
        message: format!("`input-shape` does not apply to `{arch}`: language models take token ids; use max-seq-len"),
        label: "not for language models",
        help: "remove it and give the longest sequence instead, e.g. `max-seq-len 128`".into(),
    }
}

/// `keep-float` on a model that is not an int8 image model.
pub(crate) fn keep_float_needs_int8(arch: &str) -> Rejection {
    Rejection {
        message: format!("`keep-float` applies to image models quantized to int8; `{arch}` is not"),
        label: "not used here",
        help: "set `quantize \"int8\"` on an image model, or remove `keep-float`".into(),
    }
}

/// `calibration` on a model that is not an int8 image model.
pub(crate) fn calibration_needs_int8(arch: &str) -> Rejection {
    Rejection {
        message: format!("`calibration` applies to image models quantized to int8; `{arch}` is not"),
        label: "not used here",
        help: "set `quantize \"int8\"` on an image model, or remove `calibration`".into(),
    }
}

/// A model field (or override key) set on a prebuilt program, which fixed it when exported.
pub(crate) fn not_for_prebuilt(field: &str) -> Rejection {
    let help = match field {
        "weights" | "seed" => "a prebuilt program carries its weights: name the file with `program \"model.pte\"` (`program=PATH` on the command line)".to_string(),
        "archive" => "`archive` is for `model \"pt2\"`; a `.pte` file is named with `program \"model.pte\"`".to_string(),
        "input-shape" | "dtype" | "dim-max" => format!("a prebuilt program's inputs, dtypes and shapes come from its method signature: remove `{field}`"),
        "calibration" | "keep-float" => format!("a prebuilt program was quantized (or not) when it was exported: remove `{field}`"),
        _ => format!("a prebuilt program's settings were fixed when it was exported: remove `{field}`"),
    };
    Rejection { message: format!("`{field}` does not apply to a prebuilt program"), label: "not for `pte`", help }
}
