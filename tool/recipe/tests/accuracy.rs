//! The `accuracy { … }` block inside `verify`: values, the metric against the model's runner,
//! and labelled mistakes.

mod common;

use common::catalog;
use rbuild_recipe::{render, AccuracyMetric, AccuracyReference, Recipe};

const LLAMA: &str = "model \"llama\" {\n    weights \"random:1\"\n    max-seq-len 64\n    quantize \"int4\"\n}\nbackend \"cpu\"\nrunner \"llm\"\nplatforms \"host\"\n";
const MOBILENET: &str = "model \"mobilenet_v2\" {\n    weights \"random:1\"\n    input-shape 1 3 8 8\n}\nbackend \"cpu\"\nrunner \"image-classifier\"\nplatforms \"host\"\n";

/// `head` plus `verify { accuracy { BLOCK } }`, loaded from a folder holding `wiki.txt` and an
/// `images/` folder.
fn load(head: &str, block: &str) -> (tempfile::TempDir, Result<Recipe, String>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wiki.txt"), "some text").unwrap();
    std::fs::create_dir(dir.path().join("images")).unwrap();
    let text = format!("{head}verify {{\n    accuracy {{\n{block}\n    }}\n}}\n");
    let r = Recipe::from_source(dir.path().join("r.kdl"), text, &catalog()).map_err(|r| render(&r));
    (dir, r)
}

#[test]
fn a_perplexity_gate_is_read() {
    let (dir, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"2.5%\"\nctx 32");
    let a = r.unwrap().verify.accuracy.unwrap();
    assert_eq!(a.data, dir.path().join("wiki.txt"));
    assert_eq!(a.metric, AccuracyMetric::Perplexity);
    assert_eq!(a.reference, AccuracyReference::Fp32);
    assert!((a.max_regression - 0.025).abs() < 1e-12);
    assert_eq!(a.ctx, Some(32));
}

#[test]
fn a_top_k_gate_reads_a_folder() {
    let (dir, r) = load(MOBILENET, "data \"images\"\nmetric \"top5\"\nreference \"fp32\"\nmax-regression \"0%\"");
    let a = r.unwrap().verify.accuracy.unwrap();
    assert_eq!((a.data, a.metric, a.max_regression, a.ctx), (dir.path().join("images"), AccuracyMetric::Top5, 0.0, None));
}

#[test]
fn no_block_no_gate() {
    let r = Recipe::from_source("r.kdl", LLAMA, &catalog()).unwrap();
    assert_eq!(r.verify.accuracy, None);
}

#[test]
fn the_metric_must_fit_the_runner() {
    let (_d, r) = load(MOBILENET, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"1%\"");
    let e = r.unwrap_err();
    assert!(e.contains("metric `perplexity` measures `llm` programs, but this recipe's runner is `image-classifier`"), "{e}");
    assert!(e.contains("takes `top1` or `top5`"), "{e}");
    let (_d, r) = load(LLAMA, "data \"images\"\nmetric \"wer\"\nreference \"fp32\"\nmax-regression \"1%\"");
    let e = r.unwrap_err();
    assert!(e.contains("metric `wer` measures `asr` programs") && e.contains("takes `perplexity`"), "{e}");
}

#[test]
fn mistakes_are_labelled() {
    let (_d, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexty\"\nreference \"int8\"\nmax-regression \"2\"");
    let e = r.unwrap_err();
    assert!(e.contains("unknown accuracy metric `perplexty`") && e.contains("perplexity"), "{e}");
    assert!(e.contains("unknown accuracy reference `int8`"), "{e}");
    assert!(e.contains("`max-regression` expects a percentage like \"2%\", found `2`"), "{e}");
    let (_d, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression 0.02");
    let e = r.unwrap_err();
    assert!(e.contains("expects a percentage, found a bare number") && e.contains("`max-regression \"0.02%\"`"), "{e}");
    let (_d, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"-1%\"");
    assert!(r.unwrap_err().contains("`max-regression` must not be negative"));
    let (_d, r) = load(LLAMA, "metric \"perplexity\"\nmax-regression \"1%\"\nwindow 3");
    let e = r.unwrap_err();
    assert!(e.contains("missing `data` in `accuracy`") && e.contains("missing `reference` in `accuracy`"), "{e}");
    assert!(e.contains("unknown node `window` in `accuracy`"), "{e}");
}

#[test]
fn data_must_be_what_the_metric_reads() {
    let (_d, r) = load(LLAMA, "data \"images\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"1%\"");
    assert!(r.unwrap_err().contains("is a folder; `perplexity` reads one text file"));
    let (_d, r) = load(MOBILENET, "data \"wiki.txt\"\nmetric \"top1\"\nreference \"fp32\"\nmax-regression \"1%\"");
    assert!(r.unwrap_err().contains("is not a folder; `top1` reads a folder"));
    let (_d, r) = load(LLAMA, "data \"gone.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"1%\"");
    let e = r.unwrap_err();
    assert!(e.contains("accuracy data file") && e.contains("gone.txt") && e.contains("does not exist"), "{e}");
}

#[test]
fn ctx_is_for_perplexity_within_the_context() {
    let (_d, r) = load(MOBILENET, "data \"images\"\nmetric \"top1\"\nreference \"fp32\"\nmax-regression \"1%\"\nctx 8");
    assert!(r.unwrap_err().contains("`ctx` applies to the `perplexity` metric only"));
    let (_d, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"1%\"\nctx 128");
    assert!(r.unwrap_err().contains("`ctx` 128 is longer than the model's `max-seq-len` 64"));
    let (_d, r) = load(LLAMA, "data \"wiki.txt\"\nmetric \"perplexity\"\nreference \"fp32\"\nmax-regression \"1%\"\nctx 2");
    assert!(r.unwrap_err().contains("`ctx` must be at least 3"));
}

#[test]
fn regression_is_relative_and_signed_by_direction() {
    let ppl = AccuracyMetric::Perplexity;
    assert!((ppl.regression(10.0, 10.5) - 0.05).abs() < 1e-12);
    assert!((ppl.regression(10.0, 9.0) + 0.1).abs() < 1e-12);
    let top1 = AccuracyMetric::Top1;
    assert!((top1.regression(0.8, 0.76) - 0.05).abs() < 1e-12);
    assert!(top1.regression(0.8, 0.9) < 0.0);
    assert_eq!(AccuracyMetric::Wer.regression(0.0, 0.0), 0.0);
    assert_eq!(AccuracyMetric::Wer.regression(0.0, 0.1), f64::INFINITY);
}
