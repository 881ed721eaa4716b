//! The `runner` node: a named template, or (no node) the generic runner, which model kinds
//! without a dedicated runner use.

mod common;

use common::catalog;
use rbuild_recipe::{render, Catalog, Recipe, GENERIC_RUNNER};

const NO_RUNNER: &str = "model \"mobilenet_v2\" { weights \"random:1\"; input-shape 1 3 8 8 }\nbackend \"cpu\"\nplatforms \"host\"\n";

#[test]
fn a_recipe_without_a_runner_gets_the_generic_one() {
    let r = Recipe::from_source("generic.kdl", NO_RUNNER, &catalog()).unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(GENERIC_RUNNER, "tensor-io");
    assert_eq!((r.runner.template.as_str(), r.runner.embed_program, r.runner.top), (GENERIC_RUNNER, false, None));
    // Named explicitly, it takes the usual settings.
    let named = format!("{NO_RUNNER}runner \"tensor-io\" {{ embed-program #true }}\n");
    let r = Recipe::from_source("named.kdl", named, &catalog()).unwrap();
    assert_eq!((r.runner.template.as_str(), r.runner.embed_program), (GENERIC_RUNNER, true));
}

#[test]
fn without_the_generic_template_a_runner_is_required() {
    let runners: Vec<&str> = common::RUNNERS.iter().copied().filter(|r| *r != GENERIC_RUNNER).collect();
    let catalog = Catalog { runners: &runners, ..catalog() };
    let text = render(&Recipe::from_source("generic.kdl", NO_RUNNER, &catalog).unwrap_err());
    assert!(text.contains("missing `runner` in the recipe, and the generic runner `tensor-io` is not among the templates"), "{text}");
}
