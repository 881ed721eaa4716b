//! The one error type: which file, and what is wrong with it.

use std::fmt;

/// An error reading a GGUF file. `path` is the file (or the name given to
/// [`crate::GgufFile::parse`]); `message` says what is wrong, naming the key, tensor or byte
/// offset involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufError {
    pub path: String,
    pub message: String,
}

impl GgufError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        GgufError { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for GgufError {}
