//! CLI errors: a message naming the file and the problem.

use std::fmt;
use std::path::Path;

#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// Prefixes an error with the file it concerns.
pub trait InFile<T> {
    fn in_file(self, path: &Path) -> CliResult<T>;
}

impl<T, E: fmt::Display> InFile<T> for Result<T, E> {
    fn in_file(self, path: &Path) -> CliResult<T> {
        self.map_err(|e| CliError(format!("{}: {e}", path.display())))
    }
}

macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::error::CliError(format!($($t)*))) };
}
pub(crate) use bail;
