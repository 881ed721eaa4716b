//! `key=value` overrides from the command line.

mod common;

use common::{assert_snapshot, catalog, problems, RECIPES};
use rbuild_recipe::{render, Dtype, Fallback, Quantize, Recipe, WeightsSource, OVERRIDE_KEYS};

fn recipe() -> Recipe {
    Recipe::load(format!("{RECIPES}/mobilenet-cpu.kdl"), &catalog()).unwrap()
}

#[test]
fn good_overrides_apply_in_order() {
    let mut r = recipe();
    let words = [
        "quantize=int8",
        "embed-program=true",
        "seed=3",
        "input-shape=1,3,160,160",
        "fallback=deny",
        "platform=linux-arm64,host,linux-arm64",
        "dtype=bfloat16",
        "top=1",
        "top=3",
    ];
    r.apply_overrides(&words, &catalog()).unwrap();
    assert_eq!(r.model.quantize, Quantize::Int8);
    assert!(r.runner.embed_program);
    assert_eq!(r.model.weights, WeightsSource::Random(3));
    assert_eq!(r.model.input_shape, [1, 3, 160, 160]);
    assert_eq!(r.backend.fallback, Fallback::Deny);
    assert_eq!(r.platforms, ["linux-arm64", "host"]);
    assert_eq!(r.model.dtype, Dtype::BFloat16);
    assert_eq!(r.runner.top, Some(3), "a later word wins");
}

#[test]
fn weights_paths_are_relative_to_the_current_folder() {
    let mut r = recipe();
    // Cargo runs tests in the crate folder, where Cargo.toml is a file that exists.
    r.apply_overrides(&["weights=Cargo.toml"], &catalog()).unwrap();
    assert_eq!(r.model.weights, WeightsSource::File("Cargo.toml".into()));
    r.apply_overrides(&["weights=random:9"], &catalog()).unwrap();
    assert_eq!(r.model.weights, WeightsSource::Random(9));
    let words = vec![String::from("platform=host")];
    r.apply_overrides(&words, &catalog()).unwrap();
    assert_eq!(r.platforms, ["host"]);
}

#[test]
fn home_is_expanded() {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else { return };
    let mut r = recipe();
    let report = r.apply_overrides(&["weights=~/no-such-dir-rbuild/w.safetensors"], &catalog()).unwrap_err();
    let message = &problems(&report).problems[0].message;
    let expected = std::path::Path::new(&home).join("no-such-dir-rbuild/w.safetensors");
    assert!(message.contains(&expected.display().to_string()), "{message}");
}

#[test]
fn unknown_key_gets_a_suggestion() {
    let mut r = recipe();
    let report = r.apply_overrides(&["quantise=int8"], &catalog()).unwrap_err();
    assert_snapshot("override-unknown-key", &render(&report));
    let help = problems(&report).problems[0].help.clone().unwrap();
    assert!(help.starts_with("did you mean `quantize`?"), "{help}");
    for key in OVERRIDE_KEYS {
        assert!(help.contains(&format!("`{key}`")), "the help lists `{key}`: {help}");
    }
}

#[test]
fn bad_values_name_the_key_and_the_expected_form() {
    let mut r = recipe();
    let before = format!("{r:?}");
    let words = [
        "quantize=int3",
        "platform=host,linux-amd64",
        "input-shape=1,3,x,224",
        "embed-program=yes",
        "seed=-1",
        "weights=nowhere.safetensors",
        "top=0",
        "verbose",
        "dtype=float32",
    ];
    let report = r.apply_overrides(&words, &catalog()).unwrap_err();
    assert_snapshot("override-bad-values", &render(&report));
    assert_eq!(problems(&report).problems.len(), 8, "every bad word, and only those");
    assert_eq!(format!("{r:?}"), before, "nothing applies when any word is bad");
}

#[test]
fn keep_float_override_takes_layer_names_for_int8_image_models() {
    let mut r = recipe();
    let report = r.apply_overrides(&["keep-float=features.0"], &catalog()).unwrap_err();
    assert!(problems(&report).problems[0].message.contains("`keep-float` applies to image models quantized to int8"), "{}", render(&report));
    r.apply_overrides(&["quantize=int8", "keep-float=features.0,features.1.conv"], &catalog()).unwrap();
    assert_eq!(r.model.keep_float, ["features.0", "features.1.conv"]);
    r.apply_overrides(&["keep-float="], &catalog()).unwrap();
    assert!(r.model.keep_float.is_empty(), "an empty value clears the list");
}

#[test]
fn calibration_override_takes_a_folder_for_image_models() {
    let mut r = recipe();
    r.apply_overrides(&["quantize=int8", "calibration=tests/cases/calib-images"], &catalog()).unwrap();
    assert_eq!(r.model.calibration, Some(std::path::PathBuf::from("tests/cases/calib-images")));
    let report = r.apply_overrides(&["calibration=Cargo.toml"], &catalog()).unwrap_err();
    assert!(problems(&report).problems[0].message.contains("is not a folder"), "{}", render(&report));
}
