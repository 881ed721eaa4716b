//! Imported models (`model "pt2" { archive "model.pt2"; … }`): the archive path, dynamic-dim
//! bounds, quantization and calibration, and what other model kinds say about pt2 fields.

mod common;

use std::path::Path;

use common::{catalog, problems};
use rbuild_recipe::{render, DimMax, Quantize, Recipe, WeightsSource};

fn recipe(dir: &Path, model_block: &str) -> Result<Recipe, miette::Report> {
    let path = dir.join("import.kdl");
    std::fs::write(&path, format!("description \"imported\"\n{model_block}\nbackend \"cpu\"\nrunner \"image-classifier\"\nplatforms \"host\"\n")).unwrap();
    Recipe::load(&path, &catalog())
}

fn messages(report: &miette::Report) -> Vec<String> {
    problems(report).problems.iter().map(|p| p.message.clone()).collect()
}

fn folder() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("model.pt2"), b"PK").unwrap();
    std::fs::create_dir(d.path().join("calib")).unwrap();
    std::fs::write(d.path().join("samples.safetensors"), b"{}").unwrap();
    d
}

#[test]
fn archive_bounds_and_int8_calibration_decode() {
    let d = folder();
    let r = recipe(
        d.path(),
        r#"model "pt2" { archive "model.pt2"; dim-max "ids" 1 32; dim-max "mask" 1 32; quantize "int8"; calibration "samples.safetensors" }"#,
    )
    .unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(r.model.arch, "pt2");
    assert!(r.model.is_imported() && !r.model.is_language_model());
    assert_eq!(r.model.weights, WeightsSource::File(d.path().join("model.pt2")));
    assert!(r.model.input_shape.is_empty());
    assert_eq!(r.model.quantize, Quantize::Int8);
    assert_eq!(r.model.calibration.as_deref(), Some(d.path().join("samples.safetensors").as_path()));
    let bounds = &r.model.pt2.as_ref().unwrap().dim_max;
    assert_eq!(bounds, &[DimMax { input: "ids".into(), dim: 1, max: 32 }, DimMax { input: "mask".into(), dim: 1, max: 32 }]);
    // A folder of images calibrates too.
    let r = recipe(d.path(), r#"model "pt2" { archive "model.pt2"; quantize "int8"; calibration "calib" }"#).unwrap();
    assert_eq!(r.model.calibration.as_deref(), Some(d.path().join("calib").as_path()));
    assert!(r.model.pt2.unwrap().dim_max.is_empty());
}

#[test]
fn bad_imported_models_name_each_problem() {
    let d = folder();
    let e = recipe(
        d.path(),
        r#"model "pt2" { archive "model.pt2"; weights "random:1"; input-shape 1 3 8 8; dim-max "ids" 1; max-seq-len 64; quantize "int4" }"#,
    )
    .unwrap_err();
    let m = messages(&e).join("\n");
    for needle in [
        "an imported model's weights are in its archive",
        "input shapes come from its archive",
        "`dim-max` takes an input name",
        "`max-seq-len` applies to language models only",
        "`int4` quantization applies to language models only",
    ] {
        assert!(m.contains(needle), "missing {needle:?} in:\n{m}");
    }
    // No archive at all.
    let e = recipe(d.path(), r#"model "pt2" { quantize "none" }"#).unwrap_err();
    assert!(render(&e).contains("archive \"model.pt2\""), "{}", render(&e));
    // pt2 settings on a built-in model.
    let e = recipe(d.path(), r#"model "mobilenet_v2" { weights "random:1"; input-shape 1 3 8 8; archive "model.pt2"; dim-max "x" 0 4 }"#).unwrap_err();
    let m = messages(&e).join("\n");
    assert!(m.contains("`archive` is a setting of imported models") && m.contains("`dim-max` is a setting of imported models"), "{m}");
}

#[test]
fn a_missing_archive_is_left_to_the_build() {
    // The shipped example names a file the user supplies: it must load (and list) without it.
    let d = folder();
    let r = recipe(d.path(), r#"model "pt2" { archive "not-yet.pt2" }"#).unwrap();
    assert_eq!(r.model.weights, WeightsSource::File(d.path().join("not-yet.pt2")));
}

#[test]
fn the_archive_can_be_overridden_on_the_command_line() {
    let d = folder();
    std::fs::write(d.path().join("other.pt2"), b"PK").unwrap();
    let mut r = recipe(d.path(), r#"model "pt2" { archive "model.pt2" }"#).unwrap();
    let other = d.path().join("other.pt2");
    r.apply_overrides(&[&format!("weights={}", other.display())], &catalog()).unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(r.model.weights, WeightsSource::File(other));
    // `random:` is a path here (archives carry their weights); the build reports it missing.
    r.apply_overrides(&["weights=random:3"], &catalog()).unwrap();
    assert_eq!(r.model.weights, WeightsSource::File(std::path::PathBuf::from("random:3")));
}
