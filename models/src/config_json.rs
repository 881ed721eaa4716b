//! Field readers for HF `config.json` objects shared by the families' config parsers, so every
//! family reports a bad field the same way: `<source>: <field> …`.

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::{Map, Value};

/// An error about `source` (the file, or `file: section`).
pub fn invalid(source: &str, message: impl Into<String>) -> ExportError {
    ExportError::Invalid(format!("{source}: {}", message.into()))
}

/// The positive integer `key`.
pub fn positive(obj: &Map<String, Value>, key: &str, source: &str) -> Result<usize> {
    match obj.get(key) {
        Some(v) => v.as_u64().filter(|&n| n > 0).map(|n| n as usize).ok_or_else(|| invalid(source, format!("{key} must be a positive integer, got {v}"))),
        None => Err(invalid(source, format!("{key} is missing"))),
    }
}

/// The GELU activation rbuild implements (`gelu`, erf-based); absent means the default gelu.
pub fn require_gelu(obj: &Map<String, Value>, key: &str, source: &str) -> Result<()> {
    match obj.get(key).and_then(Value::as_str) {
        None | Some("gelu") => Ok(()),
        Some(other) => Err(invalid(source, format!("{key} '{other}' is not supported (gelu)"))),
    }
}

/// The object under `key`.
pub fn section<'a>(obj: &'a Map<String, Value>, key: &str, source: &str) -> Result<&'a Map<String, Value>> {
    match obj.get(key) {
        Some(Value::Object(m)) => Ok(m),
        Some(v) => Err(invalid(source, format!("{key} must be an object, got {v}"))),
        None => Err(invalid(source, format!("{key} is missing"))),
    }
}
