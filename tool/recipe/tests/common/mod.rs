//! Shared by the integration tests. Cargo runs them from the crate folder (`tool/recipe`), so
//! relative paths here, and the paths in rendered reports, are stable.
#![allow(dead_code)]

use std::path::Path;

use rbuild_recipe::{Backend, Catalog, LoadError};

pub const MODELS: &[&str] = &["mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"];
// The CLI's real catalog (model families, runner templates) checks every shipped recipe in
// `tool/cli/tests/suite/recipe_plans.rs`; this copy must list what the shipped recipes name.
pub const LANGUAGE_MODELS: &[&str] = &["llama", "voxtral", "whisper"];
pub const BACKENDS: &[Backend] = &[Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::EthosU, Backend::Gpu, Backend::Xnnpack];
pub const RUNNERS: &[&str] = &["asr", "audio-llm", "firmware", "image-classifier", "llm", "tensor-io"];
pub const PLATFORMS: &[&str] = &["android-arm64", "corstone-300", "host", "ios-arm64", "linux-arm64", "linux-cuda", "macos-arm64"];

/// The repository's own folders, relative to the crate folder.
pub const RECIPES: &str = "../../recipes";
pub const TOOLCHAINS: &str = "../../toolchains";

pub fn catalog() -> Catalog<'static> {
    Catalog { models: MODELS, language_models: LANGUAGE_MODELS, backends: BACKENDS, runners: RUNNERS, platforms: PLATFORMS }
}

/// Compares `actual` with `tests/snapshots/<name>.txt`, or rewrites the snapshot when
/// UPDATE_SNAPSHOTS=1.
pub fn assert_snapshot(name: &str, actual: &str) {
    let path = Path::new("tests/snapshots").join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!("no snapshot {}; run with UPDATE_SNAPSHOTS=1 to create it. Output:\n{actual}", path.display())
    });
    if expected != actual {
        panic!("{} differs (UPDATE_SNAPSHOTS=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}", path.display());
    }
}

/// The problems inside a load report.
pub fn problems(report: &miette::Report) -> &LoadError {
    report.downcast_ref::<LoadError>().expect("a LoadError report")
}
