//! Prebuilt programs (`model "pte" { program "model.pte" }`): the program path, its override,
//! and the settings a `.pte` fixed when it was exported, rejected with a label and a help.

mod common;

use std::path::Path;

use common::{assert_snapshot, catalog, problems};
use rbuild_recipe::{render, Quantize, Recipe, WeightsSource, PTE_MODEL};

fn recipe(dir: &Path, model_block: &str) -> Result<Recipe, miette::Report> {
    let path = dir.join("prebuilt.kdl");
    std::fs::write(&path, format!("description \"prebuilt\"\n{model_block}\nbackend \"cpu\"\nplatforms \"host\"\n")).unwrap();
    Recipe::load(&path, &catalog())
}

/// `tests/cases/<case>.kdl`, which must fail: its report is snapshotted; returns the number of
/// problems in it.
fn case(case: &str) -> usize {
    let report = match Recipe::load(format!("tests/cases/{case}.kdl"), &catalog()) {
        Ok(recipe) => panic!("{case} loaded: {recipe:?}"),
        Err(report) => report,
    };
    assert_snapshot(case, &render(&report));
    for p in &problems(&report).problems {
        assert!(!p.labels.is_empty() && p.help.is_some(), "{case}: every problem has a label and a help: {p:?}");
    }
    problems(&report).problems.len()
}

#[test]
fn a_program_decodes_relative_to_the_recipe() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("model.pte"), b"not checked here").unwrap();
    let r = recipe(d.path(), r#"model "pte" { program "model.pte"; quantize "none" }"#).unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(r.model.arch, PTE_MODEL);
    assert!(r.model.is_prebuilt() && !r.model.is_imported() && !r.model.is_language_model());
    assert_eq!(r.model.program_file(), Some(d.path().join("model.pte").as_path()));
    assert_eq!(r.model.weights, WeightsSource::File(d.path().join("model.pte")));
    assert!(r.model.input_shape.is_empty());
    assert_eq!(r.model.quantize, Quantize::None);
    assert_eq!(r.runner.template, rbuild_recipe::GENERIC_RUNNER);
    // Other kinds have no program file.
    let built_in = recipe(d.path(), r#"model "mobilenet_v2" { weights "random:1"; input-shape 1 3 8 8 }"#).unwrap();
    assert!(!built_in.model.is_prebuilt() && built_in.model.program_file().is_none());
}

#[test]
fn a_missing_program_is_left_to_the_build() {
    // The shipped example names a file the user supplies: it must load (and list) without it.
    let d = tempfile::tempdir().unwrap();
    let r = recipe(d.path(), r#"model "pte" { program "not-yet.pte" }"#).unwrap();
    assert_eq!(r.model.program_file(), Some(d.path().join("not-yet.pte").as_path()));
    // A folder is never a program.
    std::fs::create_dir(d.path().join("folder.pte")).unwrap();
    let e = recipe(d.path(), r#"model "pte" { program "folder.pte" }"#).unwrap_err();
    let text = render(&e);
    assert!(text.contains("program path") && text.contains("folder.pte") && text.contains("is not a file"), "{text}");
}

#[test]
fn settings_fixed_in_the_program_are_rejected() {
    assert_eq!(case("pte-fields"), 6);
}

#[test]
fn a_program_needs_its_file_and_the_cpu_backend() {
    assert_eq!(case("pte-no-program"), 3);
}

#[test]
fn program_is_for_prebuilt_models_only() {
    assert_eq!(case("pte-program-elsewhere"), 1);
}

#[test]
fn a_misspelt_pte_is_taken_as_one() {
    // `ptee` gets "did you mean `pte`?" and is not also told it lacks an input shape.
    let d = tempfile::tempdir().unwrap();
    let e = recipe(d.path(), r#"model "ptee" { program "model.pte" }"#).unwrap_err();
    let messages: Vec<String> = problems(&e).problems.iter().map(|p| p.message.clone()).collect();
    assert_eq!(messages, ["unknown model `ptee`"], "{}", render(&e));
    assert!(render(&e).contains("did you mean `pte`?"), "{}", render(&e));
}

#[test]
fn the_program_can_be_overridden_on_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let mut r = recipe(d.path(), r#"model "pte" { program "model.pte" }"#).unwrap();
    let other = d.path().join("other.pte");
    r.apply_overrides(&[&format!("program={}", other.display()), "top=3", "atol=1e-4"], &catalog()).unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(r.model.program_file(), Some(other.as_path()));
    // Relative to the current folder (cargo runs tests in the crate folder).
    r.apply_overrides(&["program=model.pte"], &catalog()).unwrap();
    assert_eq!(r.model.program_file(), Some(Path::new("model.pte")));
    r.apply_overrides(&["quantize=none"], &catalog()).unwrap();

    // Keys a program fixed, and `program` on an exported model: one report, nothing applied.
    let report = r
        .apply_overrides(&["weights=w.safetensors", "seed=1", "input-shape=1,3,8,8", "quantize=int8", "max-seq-len=64", "program=src"], &catalog())
        .unwrap_err();
    assert_snapshot("override-pte", &render(&report));
    assert_eq!(problems(&report).problems.len(), 6);
    assert_eq!(r.model.program_file(), Some(Path::new("model.pte")), "a failed override changes nothing");
    let mut built_in = recipe(d.path(), r#"model "mobilenet_v2" { weights "random:1"; input-shape 1 3 8 8 }"#).unwrap();
    let report = built_in.apply_overrides(&["program=model.pte"], &catalog()).unwrap_err();
    let text = render(&report);
    assert!(text.contains("`program` applies to `model \"pte\"` only") && text.contains("not for this model"), "{text}");
}
