//! Every shipped recipe and platform file, and every KDL example in the docs, loads (niri's
//! "the wiki parses" test): walking the folders picks up new files without editing this test.

mod common;

use std::path::Path;

use common::{catalog, RECIPES, TOOLCHAINS};
use rbuild_recipe::{load_platforms, render, Platform, Recipe, RunSpec};

fn kdl_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_recipe_loads() {
    let files = kdl_files(RECIPES);
    assert!(!files.is_empty());
    for path in files {
        if let Err(report) = Recipe::load(&path, &catalog()) {
            panic!("{}", render(&report));
        }
    }
}

#[test]
fn every_platform_loads_and_the_catalog_matches() {
    let platforms = load_platforms(TOOLCHAINS).unwrap_or_else(|r| panic!("{}", render(&r)));
    let names: Vec<&str> = platforms.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, common::PLATFORMS, "tests/common's platform list follows toolchains/");
    assert_eq!(kdl_files(TOOLCHAINS).len(), platforms.len());
}

#[test]
fn shipped_files_decode_to_what_they_say() {
    let recipe = Recipe::load(Path::new(RECIPES).join("mobilenet-cpu.kdl"), &catalog()).unwrap();
    assert_eq!(recipe.name, "mobilenet-cpu");
    assert_eq!(recipe.model.arch, "mobilenet_v2");
    assert_eq!(recipe.model.weights, rbuild_recipe::WeightsSource::Random(1));
    assert_eq!(recipe.model.input_shape, [1, 3, 224, 224]);
    assert_eq!(recipe.backend.kind, rbuild_recipe::Backend::Cpu);
    assert_eq!(recipe.runner.template, "image-classifier");
    assert_eq!(recipe.runner.top, Some(5));
    assert!(!recipe.runner.embed_program);
    assert_eq!(recipe.platforms, ["host", "linux-arm64"]);
    assert_eq!(recipe.verify.input, rbuild_recipe::VerifyInput::Random(1));
    assert_eq!(recipe.verify.tolerance(&recipe.model), (0.001, 0.001));

    let platforms = load_platforms(TOOLCHAINS).unwrap();
    let by_name = |n: &str| platforms.iter().find(|p| p.name == n).unwrap_or_else(|| panic!("no platform {n}"));
    let host = by_name("host");
    assert_eq!((host.name.as_str(), host.rust_target.as_deref(), &host.run), ("host", None, &RunSpec::Native));
    let tools: Vec<&str> = host.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["cargo", "rustc", "cc"]);
    let arm = by_name("linux-arm64");
    assert_eq!(arm.rust_target.as_deref(), Some("aarch64-unknown-linux-gnu"));
    assert_eq!(arm.linker.as_deref(), Some("aarch64-linux-gnu-gcc"));
    assert_eq!(
        arm.run,
        RunSpec::Emulator { program: "qemu-aarch64".into(), args: vec!["-L".into(), "/usr/aarch64-linux-gnu".into()] }
    );
    // Apple platforms build on macOS only; phones do not run binaries on the build machine.
    let mac = by_name("macos-arm64");
    assert_eq!((mac.host_os.as_deref(), mac.rust_target.as_deref(), &mac.run), (Some("macos"), Some("aarch64-apple-darwin"), &RunSpec::Native));
    let ios = by_name("ios-arm64");
    assert_eq!((ios.host_os.as_deref(), ios.rust_target.as_deref()), (Some("macos"), Some("aarch64-apple-ios")));
    assert!(matches!(&ios.run, RunSpec::Elsewhere(why) if why.contains("iOS device")));
    let android = by_name("android-arm64");
    assert_eq!((android.host_os.as_deref(), android.linker.as_deref()), (None, Some("aarch64-linux-android21-clang")));
    assert!(matches!(&android.run, RunSpec::Elsewhere(why) if why.contains("adb")));
}

/// The ```kdl blocks of a markdown file, with the line each starts on.
fn kdl_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match current.take() {
            None if fence.starts_with("```kdl") => current = Some((i + 2, String::new())),
            None => {}
            Some(block) if fence.starts_with("```") => blocks.push(block),
            Some((start, mut text)) => {
                text.push_str(line);
                text.push('\n');
                current = Some((start, text));
            }
        }
    }
    blocks
}

/// A block with a `model` node is a recipe, one with `target` a platform file, anything else
/// just has to be KDL.
fn check_block(file: &str, line: usize, text: &str) -> Result<(), String> {
    let name = format!("{file}:{line}");
    let doc: kdl::KdlDocument = text.parse().map_err(|e: kdl::KdlError| format!("{name}: {e:?}"))?;
    let has = |node: &str| doc.nodes().iter().any(|n| n.name().value() == node);
    let loaded = if has("model") {
        Recipe::from_source(&name, text, &catalog()).map(drop)
    } else if has("target") {
        Platform::from_source(&name, text).map(drop)
    } else {
        Ok(())
    };
    loaded.map_err(|report| render(&report))
}

#[test]
fn every_kdl_block_in_the_readmes_loads() {
    let mut recipes = 0;
    for file in ["README.md", "../../README.md"] {
        let markdown = std::fs::read_to_string(file).unwrap();
        for (line, text) in kdl_blocks(&markdown) {
            check_block(file, line, &text).unwrap_or_else(|e| panic!("{e}"));
            recipes += usize::from(text.contains("model "));
        }
    }
    assert!(recipes >= 1, "the crate README shows a full recipe");
}

#[test]
fn the_readme_recipe_is_the_shipped_one() {
    // The README's full example and recipes/mobilenet-cpu.kdl describe the same build (the
    // README's lists one more platform).
    let markdown = std::fs::read_to_string("README.md").unwrap();
    let (_, text) = kdl_blocks(&markdown).into_iter().find(|(_, t)| t.contains("model ")).unwrap();
    let readme = Recipe::from_source("mobilenet-cpu.kdl", text, &catalog()).unwrap();
    let shipped = Recipe::load(Path::new(RECIPES).join("mobilenet-cpu.kdl"), &catalog()).unwrap();
    assert_eq!(readme.description, shipped.description);
    assert_eq!((readme.model.arch, readme.model.weights), (shipped.model.arch, shipped.model.weights));
    assert_eq!(readme.platforms, ["host", "linux-arm64"]);
}

#[test]
fn examples_in_help_lines_are_valid() {
    // "Add it, for example: `…`" must not suggest something that fails to parse.
    let mut examples = Vec::new();
    for text in ["", "description \"x\"", "runner {}\n", "model \"llama\" {}\n"] {
        let report = Recipe::from_source("r.kdl", text, &catalog()).unwrap_err();
        examples.extend(help_examples(&report));
    }
    let report = Platform::from_source("p.kdl", "").unwrap_err();
    examples.extend(help_examples(&report));
    let report = Platform::from_source("p.kdl", "description \"x\"").unwrap_err();
    examples.extend(help_examples(&report));
    assert!(examples.len() >= 11, "{examples:?}");
    for example in examples {
        if let Err(e) = example.replace('…', "x").parse::<kdl::KdlDocument>() {
            panic!("help example `{example}` is not KDL: {e:?}");
        }
    }
    // The minimal recipe offered for an empty file is a complete one.
    let report = Recipe::from_source("r.kdl", "", &catalog()).unwrap_err();
    let minimal = &help_examples(&report)[0];
    Recipe::from_source("minimal.kdl", minimal.as_str(), &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
}

/// The `code` spans after "for example:" / "a minimal …:" in a report's help lines.
fn help_examples(report: &miette::Report) -> Vec<String> {
    let mut out = Vec::new();
    for p in &common::problems(report).problems {
        let Some(help) = &p.help else { continue };
        let Some((_, rest)) = help.split_once(": `") else { continue };
        for (i, part) in rest.split('`').enumerate() {
            if i % 2 == 0 && !part.is_empty() {
                out.push(part.to_string());
            }
        }
    }
    out
}
