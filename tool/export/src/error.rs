//! Export errors: each names the op, tensor or weight involved.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum ExportError {
    /// Shape inference rejected a call: the op and why (with the shapes involved).
    Shape { op: String, message: String },
    /// A weight is missing from, or mis-shaped in, the weights file.
    Weight { name: String, message: String },
    /// An operator the pipeline has no schema or rule for.
    UnknownOp(String),
    /// A pass or the emitter found the graph in a state it cannot handle.
    Invalid(String),
    Io { path: String, message: String },
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Shape { op, message } => write!(f, "{op}: {message}"),
            ExportError::Weight { name, message } => write!(f, "weight '{name}': {message}"),
            ExportError::UnknownOp(op) => write!(f, "operator {op} is not known to the export pipeline"),
            ExportError::Invalid(m) => write!(f, "{m}"),
            ExportError::Io { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for ExportError {}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

pub(crate) fn shape_err(op: &str, message: impl Into<String>) -> ExportError {
    ExportError::Shape { op: op.to_string(), message: message.into() }
}
