//! The recipe's `verify { … }` block: values, defaults per model, and labelled mistakes.

mod common;

use common::catalog;
use rbuild_recipe::{render, Recipe, VerifyInput};

const HEAD: &str = "model \"mobilenet_v2\" {\n    weights \"random:1\"\n    input-shape 1 3 8 8\n    quantize \"QUANT\"\n}\nbackend \"cpu\"\nrunner \"image-classifier\"\nplatforms \"host\"\n";

fn recipe(quantize: &str, verify: &str) -> Result<Recipe, String> {
    let text = format!("{}{verify}", HEAD.replace("QUANT", quantize));
    Recipe::from_source("tests/cases/v.kdl", text, &catalog()).map_err(|r| render(&r))
}

#[test]
fn defaults_follow_the_model() {
    let r = recipe("none", "").unwrap();
    assert_eq!(r.verify.input, VerifyInput::Random(0));
    assert_eq!(r.verify.tolerance(&r.model), (1e-3, 1e-3));
    // An int8 program computes the same integers everywhere: exact by default.
    let q = recipe("int8", "").unwrap();
    assert_eq!(q.verify.tolerance(&q.model), (0.0, 0.0));
}

#[test]
fn values_are_read_and_override_defaults() {
    let r = recipe("int8", "verify {\n    seed 7\n    atol 1\n    rtol 2.5e-2\n}\n").unwrap();
    assert_eq!(r.verify.input, VerifyInput::Random(7));
    assert_eq!(r.verify.tolerance(&r.model), (1.0, 0.025));
    // An image input is resolved against the recipe's folder like weights.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cat.png"), b"png").unwrap();
    let text = format!("{}verify {{ input \"cat.png\" }}\n", HEAD.replace("QUANT", "none"));
    let r = Recipe::from_source(dir.path().join("r.kdl"), text, &catalog()).unwrap();
    assert_eq!(r.verify.input, VerifyInput::Image(dir.path().join("cat.png")));
}

#[test]
fn mistakes_are_labelled() {
    let e = recipe("none", "verify {\n    atol \"0.1\"\n    rtol -1\n    tolerance 3\n}\n").unwrap_err();
    assert!(e.contains("`atol` expects a number, found a string"), "{e}");
    assert!(e.contains("write the number without quotes: `0.1`"), "{e}");
    assert!(e.contains("`rtol` must be from 0 to 1000000000, found -1"), "{e}");
    assert!(e.contains("tolerance"), "{e}");
    let e = recipe("none", "verify {\n    seed 1\n    input \"missing.png\"\n}\n").unwrap_err();
    assert!(e.contains("verify input file") && e.contains("missing.png") && e.contains("does not exist"), "{e}");
    let e = recipe("none", "verify 3\n").unwrap_err();
    assert!(e.contains("`verify` takes no values"), "{e}");
}

#[test]
fn seed_and_input_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cat.png"), b"png").unwrap();
    let text = format!("{}verify {{\n    input \"cat.png\"\n    seed 2\n}}\n", HEAD.replace("QUANT", "none"));
    let e = Recipe::from_source(dir.path().join("r.kdl"), text, &catalog()).map_err(|r| render(&r)).unwrap_err();
    assert!(e.contains("`seed` and `input` exclude each other"), "{e}");
}

#[test]
fn tolerances_can_be_overridden_on_the_command_line() {
    let mut r = recipe("none", "verify {\n    atol 0.5\n}\n").unwrap();
    r.apply_overrides(&["rtol=0", "atol=1e-6"], &catalog()).unwrap();
    assert_eq!(r.verify.tolerance(&r.model), (1e-6, 0.0));
    let e = r.apply_overrides(&["atol=-1", "rtol=x"], &catalog()).unwrap_err();
    let text = render(&e);
    assert!(text.contains("bad value `-1` for `atol`") && text.contains("bad value `x` for `rtol`"), "{text}");
}
