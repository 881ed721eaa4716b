//! Snapshots of the rendered report for each class of mistake, from files in `tests/cases/`.

mod common;

use common::{assert_snapshot, catalog, problems, BACKENDS};
use rbuild_recipe::{load_platforms, render, Backend, Catalog, Recipe};

/// Loads `tests/cases/<case>.kdl`, which must fail, snapshots the report and returns the
/// number of problems in it.
fn recipe_case(case: &str, catalog: &Catalog) -> usize {
    let report = match Recipe::load(format!("tests/cases/{case}.kdl"), catalog) {
        Ok(recipe) => panic!("{case} loaded: {recipe:?}"),
        Err(report) => report,
    };
    assert_snapshot(case, &render(&report));
    problems(&report).problems.len()
}

#[test]
fn kdl_syntax_errors_are_wrapped_with_the_file_name() {
    assert_eq!(recipe_case("syntax", &catalog()), 2);
}

#[test]
fn unknown_nodes_get_suggestions() {
    assert_eq!(recipe_case("unknown-node", &catalog()), 4);
}

#[test]
fn properties_are_rejected() {
    assert_eq!(recipe_case("unknown-property", &catalog()), 4);
}

#[test]
fn wrong_value_types() {
    assert_eq!(recipe_case("wrong-type", &catalog()), 6);
}

#[test]
fn unknown_names_get_suggestions() {
    assert_eq!(recipe_case("unknown-names", &catalog()), 8);
}

#[test]
fn backend_not_in_this_build() {
    let only_cpu = Catalog { backends: &[Backend::Cpu], ..catalog() };
    assert_eq!(BACKENDS.len(), 6);
    assert_eq!(recipe_case("unavailable-backend", &only_cpu), 1);
}

#[test]
fn missing_required_nodes() {
    assert_eq!(recipe_case("missing-required", &catalog()), 3);
    assert_eq!(recipe_case("missing-child", &catalog()), 2);
    assert_eq!(recipe_case("empty", &catalog()), 1);
}

#[test]
fn weights_file_must_exist() {
    assert_eq!(recipe_case("weights-missing", &catalog()), 1);
    assert_eq!(recipe_case("bad-seed", &catalog()), 1);
}

#[test]
fn duplicates_point_at_both() {
    assert_eq!(recipe_case("duplicates", &catalog()), 2);
}

#[test]
fn counts_and_ranges() {
    assert_eq!(recipe_case("shape-errors", &catalog()), 8);
}

#[test]
fn all_errors_of_a_file_come_in_one_report() {
    let report = Recipe::load("tests/cases/multi-error.kdl", &catalog()).unwrap_err();
    assert_snapshot("multi-error", &render(&report));
    let messages: Vec<&str> = problems(&report).problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "missing `platforms` in the recipe",
            "weights file `tests/cases/missing.safetensors` does not exist",
            "unknown node `quantise` in `model`",
            "unexpected property `fallback` on `backend`",
            "`top` expects an integer, found a string",
            "unknown node `platform` in the recipe",
        ]
    );
    // Every problem names its file and points at a span with a label and a help line.
    for p in &problems(&report).problems {
        assert_eq!(p.source.as_ref().map(|s| s.name()), Some("tests/cases/multi-error.kdl"));
        assert!(!p.labels.is_empty() && p.help.is_some(), "{p:?}");
    }
}

#[test]
fn unreadable_recipe() {
    let report = Recipe::load("tests/cases/no-such-recipe.kdl", &catalog()).unwrap_err();
    let text = render(&report);
    assert!(text.contains("cannot read `tests/cases/no-such-recipe.kdl`"), "{text}");
}

#[test]
fn platform_file_errors_of_all_files_in_one_report() {
    let report = load_platforms("tests/cases/toolchains-bad").unwrap_err();
    assert_snapshot("toolchains-bad", &render(&report));
    let files: std::collections::BTreeSet<_> =
        problems(&report).problems.iter().filter_map(|p| p.source.as_ref()).map(|s| s.name().to_string()).collect();
    assert_eq!(files.len(), 3, "{files:?}");
}

#[test]
fn truncated_files_never_panic() {
    // Every prefix of every case and shipped file: a crude fuzz of the parser, the decoder and
    // the renderer (spans must stay inside the text). Cuts fall on every character next to a
    // non-alphanumeric one (each token boundary, inside every run of punctuation or space) and
    // on every 4th character inside words; each character everywhere is the fuzz target's job.
    let mut files: Vec<_> = std::fs::read_dir("tests/cases").unwrap().map(|e| e.unwrap().path()).collect();
    files.extend(std::fs::read_dir("tests/cases/toolchains-bad").unwrap().map(|e| e.unwrap().path()));
    files.extend(std::fs::read_dir("tests/cases/board-bad").unwrap().map(|e| e.unwrap().path()));
    files.extend(std::fs::read_dir(common::RECIPES).unwrap().map(|e| e.unwrap().path()));
    files.extend(std::fs::read_dir(common::TOOLCHAINS).unwrap().map(|e| e.unwrap().path()));
    for path in files.iter().filter(|p| p.is_file()) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut previous = ' ';
        for (n, (cut, c)) in text.char_indices().enumerate() {
            let boundary = !c.is_ascii_alphanumeric() || !previous.is_ascii_alphanumeric();
            previous = c;
            if !boundary && n % 4 != 0 {
                continue;
            }
            let prefix = &text[..cut];
            if let Err(report) = Recipe::from_source("cut.kdl", prefix, &catalog()) {
                assert!(!render(&report).is_empty());
            }
            if let Err(report) = rbuild_recipe::Platform::from_source("cut.kdl", prefix) {
                assert!(!render(&report).is_empty());
            }
        }
    }
}

#[test]
fn recipes_are_found_by_name_with_suggestions() {
    let path = Recipe::find(common::RECIPES, "mobilenet-cpu").unwrap();
    assert_eq!(path, std::path::Path::new(common::RECIPES).join("mobilenet-cpu.kdl"));
    // A fixed folder of names, so the snapshot does not change with every recipe added.
    let report = Recipe::find("tests/find-recipes", "mobilnet-cpu").unwrap_err();
    assert_snapshot("unknown-recipe", &render(&report));
    assert!(rbuild_recipe::recipe_names(common::RECIPES).unwrap().contains(&"mobilenet-cpu".to_string()));
}

#[test]
fn weights_path_that_is_a_folder() {
    let text = "model \"mobilenet_v2\" { weights \"cases\"; input-shape 1 3 224 224 }\nbackend \"cpu\"\nrunner \"image-classifier\"\nplatforms \"host\"\n";
    let report = Recipe::from_source("tests/folder-weights.kdl", text, &catalog()).unwrap_err();
    assert_eq!(problems(&report).problems[0].message, "weights path `tests/cases` is not a file");
}

#[test]
fn calibration_needs_int8_and_an_existing_folder() {
    assert_eq!(recipe_case("calibration-bad", &catalog()), 1);
    assert_eq!(recipe_case("calibration-missing", &catalog()), 1);
}

#[test]
fn keep_float_needs_int8() {
    assert_eq!(recipe_case("keep-float-fp32", &catalog()), 1);
    let text = std::fs::read_to_string("tests/cases/keep-float-fp32.kdl").unwrap().replace("quantize \"none\"", "quantize \"int8\"");
    let r = Recipe::from_source(std::path::Path::new("keep-float.kdl"), text, &catalog()).unwrap();
    assert_eq!(r.model.keep_float, ["features.0", "features.1"]);
}

#[test]
fn calibration_folder_is_resolved_against_the_recipe() {
    let text = std::fs::read_to_string("tests/cases/calibration-bad.kdl").unwrap().replace("quantize \"none\"", "quantize \"int8\"");
    let path = std::path::Path::new("tests/cases/calibration-good.tmp.kdl");
    std::fs::write(path, text).unwrap();
    let loaded = Recipe::load(path, &catalog());
    std::fs::remove_file(path).unwrap();
    let r = loaded.unwrap();
    assert_eq!(r.model.calibration, Some(std::path::PathBuf::from("tests/cases/calib-images")));
}
