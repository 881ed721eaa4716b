//! Recipe and platform files are written by users: any text must load or come back as a
//! report that renders (spans inside the text), never a panic. The input's lines after a
//! `---` line are `key=value` overrides applied to a recipe that loaded.
//!
//!     cd tool/recipe/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run recipe corpus/recipe ../../../recipes ../../../toolchains -- -max_total_time=900

#![no_main]

use libfuzzer_sys::fuzz_target;
use rbuild_recipe::{render, Backend, Catalog, Platform, Recipe};

const CATALOG: Catalog<'static> = Catalog {
    models: &["mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"],
    language_models: &["llama", "voxtral", "whisper"],
    backends: &[Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::EthosU, Backend::Gpu],
    runners: &["asr", "audio-llm", "firmware", "image-classifier", "llm", "tensor-io"],
    platforms: &["android-arm64", "corstone-300", "host", "ios-arm64", "linux-arm64", "linux-cuda", "macos-arm64"],
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (file, overrides) = text.split_once("\n---\n").unwrap_or((&text, ""));
    match Recipe::from_source("fuzz.kdl", file, &CATALOG) {
        Ok(mut recipe) => {
            let words: Vec<&str> = overrides.lines().collect();
            if let Err(report) = recipe.apply_overrides(&words, &CATALOG) {
                assert!(!render(&report).is_empty());
            }
        }
        Err(report) => assert!(!render(&report).is_empty()),
    }
    if let Err(report) = Platform::from_source("fuzz.kdl", file) {
        assert!(!render(&report).is_empty());
    }
});
