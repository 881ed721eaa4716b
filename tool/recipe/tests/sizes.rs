//! Size settings (`max-seq-len`, `max-audio-seconds`): a plain value is the user's own and
//! exact, `up-to=N` a default the build may lower to what the checkpoint holds, and a
//! command-line override is always exact.

mod common;

use common::{catalog, problems, RECIPES};
use rbuild_recipe::{render, Recipe, SizeRequest};

fn voxtral(sizes: &str) -> String {
    format!("model \"voxtral\" {{\n    weights \"random:7\"\n{sizes}}}\nbackend \"cpu\"\nrunner \"audio-llm\"\nplatforms \"host\"\n")
}

fn load(text: &str) -> Recipe {
    Recipe::from_source("tests/cases/sizes.kdl", text, &catalog()).unwrap_or_else(|r| panic!("{}", render(&r)))
}

/// The problem messages and helps of a recipe that must fail.
fn rejected(text: &str) -> Vec<(String, String)> {
    let report = Recipe::from_source("tests/cases/sizes.kdl", text, &catalog()).unwrap_err();
    problems(&report).problems.iter().map(|p| (p.message.clone(), p.help.clone().unwrap_or_default())).collect()
}

#[test]
fn a_plain_value_is_exact_and_up_to_is_a_default() {
    let llm = load(&voxtral("    max-seq-len 512\n    max-audio-seconds 30\n")).model.llm.unwrap();
    assert_eq!((llm.max_seq_len, llm.max_audio_seconds), (SizeRequest::Exactly(512), Some(SizeRequest::Exactly(30))));
    let llm = load(&voxtral("    max-seq-len up-to=1024\n    max-audio-seconds up-to=60\n")).model.llm.unwrap();
    assert_eq!((llm.max_seq_len, llm.max_audio_seconds), (SizeRequest::UpTo(1024), Some(SizeRequest::UpTo(60))));
    assert_eq!((llm.max_seq_len.value(), llm.max_seq_len.to_string()), (1024, "up-to=1024".to_string()));
}

#[test]
fn overrides_are_exact() {
    let mut r = load(&voxtral("    max-seq-len up-to=1024\n    max-audio-seconds up-to=60\n"));
    r.apply_overrides(&["max-seq-len=2048"], &catalog()).unwrap();
    let llm = r.model.llm.clone().unwrap();
    assert_eq!((llm.max_seq_len, llm.max_audio_seconds), (SizeRequest::Exactly(2048), Some(SizeRequest::UpTo(60))), "only the key given changes");
    r.apply_overrides(&["max-audio-seconds=6"], &catalog()).unwrap();
    assert_eq!(r.model.llm.unwrap().max_audio_seconds, Some(SizeRequest::Exactly(6)));
}

#[test]
fn the_shipped_language_recipes_write_defaults() {
    // A shipped recipe must build any checkpoint a user names with `weights=`.
    for name in ["llama-cpu", "whisper-cpu", "whisper-metal", "voxtral-cpu", "voxtral-cuda"] {
        let r = Recipe::load(format!("{RECIPES}/{name}.kdl"), &catalog()).unwrap_or_else(|e| panic!("{}", render(&e)));
        let llm = r.model.llm.unwrap();
        assert!(matches!(llm.max_seq_len, SizeRequest::UpTo(_)), "{name}: {:?}", llm.max_seq_len);
        if name.starts_with("voxtral") {
            assert_eq!(llm.max_audio_seconds, Some(SizeRequest::UpTo(60)), "{name}");
        }
    }
}

#[test]
fn malformed_sizes_are_reported() {
    let cases: [(&str, &str, &str); 6] = [
        ("    max-seq-len upto=1024\n", "unexpected property `upto` on `max-seq-len`", "did you mean `up-to`?"),
        ("    max-seq-len size=1024\n", "unexpected property `size` on `max-seq-len`", "or `max-seq-len up-to=N`"),
        ("    max-seq-len up-to=0\n", "`max-seq-len` must be from 1 to 1000000, found 0", ""),
        ("    max-seq-len up-to=\"1024\"\n", "`max-seq-len` expects an integer, found a string", "without quotes"),
        ("    max-seq-len 1 up-to=2\n", "`max-seq-len` takes one value, found 2", "`max-seq-len up-to=N`"),
        ("    max-seq-len 64\n    max-audio-seconds up-to=90000\n", "`max-audio-seconds` must be from 1 to 86400, found 90000", ""),
    ];
    for (sizes, message, help) in cases {
        let found = rejected(&voxtral(sizes));
        assert_eq!(found.len(), 1, "{sizes}: {found:?}");
        assert_eq!(found[0].0, message, "{sizes}");
        assert!(found[0].1.contains(help), "{sizes}: help {:?} lacks {help:?}", found[0].1);
    }
    let found = rejected(&voxtral("    max-seq-len\n"));
    assert_eq!(found[0].0, "`max-seq-len` needs a value");
}
