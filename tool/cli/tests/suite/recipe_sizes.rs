//! A shipped recipe's sizes adapt to the checkpoint named with `weights=…`: its `up-to=`
//! defaults the model cannot hold are lowered with a note naming both values, and the plan
//! (step label, cache key) carries the lowered sizes. A size the user chose, on the command
//! line or in their own recipe file, that the model cannot hold fails before anything is
//! built, naming the value and the limit. Plans only: nothing compiles.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

/// `rbuild plan …` in the repository with outputs in a fresh folder; `root` replaces the
/// project (a user's own recipes folder).
fn plan(args: &[&str], root: Option<&Path>) -> (bool, String) {
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rbuild"));
    command.current_dir(common::repo()).env("RBUILD_OUT", out.path()).arg("plan").args(args);
    if let Some(root) = root {
        command.env("RBUILD_ROOT", root);
    }
    let o = command.output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn weights(model: &str) -> String {
    format!("weights={}", testdata().join("models").join(model).display())
}

#[test]
fn recipe_defaults_are_lowered_to_the_checkpoint() {
    for recipe in ["voxtral-cpu", "voxtral-cuda"] {
        let (ok, log) = plan(&[recipe, &weights("voxtral_tiny")], None);
        assert!(ok, "{log}");
        assert!(log.contains(&format!("note: {recipe}: max-seq-len 1024 (recipe default) lowered to 256, the model's max_position_embeddings")), "{log}");
        assert!(
            log.contains(&format!("note: {recipe}: max-audio-seconds 60 (recipe default) lowered to 19.2, what max-seq-len 256 holds (6 chunks of 40 audio tokens)")),
            "{log}"
        );
        assert!(log.contains("max_seq_len 256"), "the export step names the size it builds:\n{log}");
    }
    let (ok, log) = plan(&["whisper-cpu", &weights("whisper_tiny"), "platform=host"], None);
    assert!(ok, "{log}");
    assert!(log.contains("note: whisper-cpu: max-seq-len 448 (recipe default) lowered to 64, the decoder's max_target_positions"), "{log}");
    let (ok, log) = plan(&["llama-cpu", &weights("llama_tiny")], None);
    assert!(ok && log.contains("note: llama-cpu: max-seq-len 512 (recipe default) lowered to 256, the model's max_position_embeddings"), "{log}");
    // A size the checkpoint holds: nothing to lower.
    let (ok, log) = plan(&["llama-cpu", &weights("llama_tiny"), "max-seq-len=128"], None);
    assert!(ok && !log.contains("lowered"), "{log}");
}

#[test]
fn sizes_the_user_chose_that_the_model_cannot_hold_fail() {
    for (args, message) in [
        (vec!["voxtral-cpu", "max-seq-len=1024"], "max_seq_len 1024 exceeds the model's max_position_embeddings 256"),
        (vec!["voxtral-cuda", "max-seq-len=1024"], "max_seq_len 1024 exceeds the model's max_position_embeddings 256"),
        (vec!["voxtral-cpu", "max-audio-seconds=60"], "max_audio_seconds 60 needs 19 chunks of 40 audio tokens, more than max_seq_len 256 holds"),
        (vec!["llama-cpu", "max-seq-len=1024"], "max_seq_len 1024 exceeds the model's max_position_embeddings 256"),
        (vec!["whisper-cpu", "max-seq-len=448"], "max_seq_len 448 exceeds the decoder's max_target_positions 64"),
    ] {
        let model = match args[0] {
            r if r.starts_with("voxtral") => "voxtral_tiny",
            r if r.starts_with("llama") => "llama_tiny",
            _ => "whisper_tiny",
        };
        let w = weights(model);
        let mut words = args.clone();
        words.insert(1, &w);
        let (ok, log) = plan(&words, None);
        assert!(!ok, "{words:?} planned:\n{log}");
        assert!(log.contains(message) && log.contains(&format!("error: {}", args[0])), "{words:?}:\n{log}");
        assert!(!log.contains("lowered"), "an exact value is never lowered:\n{log}");
    }
}

#[test]
fn a_users_own_recipe_is_exact() {
    // A project of the user's own: their recipe, the repository's platforms and runners.
    let project = tempfile::tempdir().unwrap();
    let repo = common::repo();
    std::fs::create_dir(project.path().join("recipes")).unwrap();
    for folder in ["toolchains", "templates"] {
        std::os::unix::fs::symlink(repo.join(folder), project.path().join(folder)).unwrap();
    }
    let recipe = |sizes: &str| {
        let text = format!("model \"voxtral\" {{\n    weights \"random:7\"\n{sizes}}}\nbackend \"cpu\"\nrunner \"audio-llm\"\nplatforms \"host\"\n");
        std::fs::write(project.path().join("recipes/my-voxtral.kdl"), text).unwrap();
    };
    let w = weights("voxtral_tiny");
    recipe("    max-seq-len 1024\n");
    let (ok, log) = plan(&["my-voxtral", &w], Some(project.path()));
    assert!(!ok && log.contains("max_seq_len 1024 exceeds the model's max_position_embeddings 256"), "{log}");
    // Written as a default, it adapts like the shipped recipes.
    recipe("    max-seq-len up-to=1024\n");
    let (ok, log) = plan(&["my-voxtral", &w], Some(project.path()));
    assert!(ok && log.contains("note: my-voxtral: max-seq-len 1024 (recipe default) lowered to 256"), "{log}");
}
