//! The built binary's failures: exit status 1, a message naming the file, never a panic.

mod common;
use common::{temp_dir, testdata};

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_whisper_runner");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run whisper_runner")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fails_with(o: &Output, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "missing {n:?} in: {e}");
    }
}

#[test]
fn damaged_wav_files_fail_cleanly() {
    // The audio is read before the program, so no program is needed to see these errors.
    for name in ["wav_bad_riff.wav", "wav_header_only.wav", "wav_odd_data_size.wav", "wav_truncated_data.wav"] {
        let p = testdata(&format!("bad/{name}"));
        let o = run(&["--model", "/nonexistent/model.pte", "--audio", p.to_str().unwrap()]);
        fails_with(&o, &[name]);
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn missing_and_invalid_program_files() {
    let wav = testdata("models/audio/fox_16k.wav");
    let o = run(&["--model", "/nonexistent/model.pte", "--audio", wav.to_str().unwrap()]);
    fails_with(&o, &["/nonexistent/model.pte"]);
    let bad = testdata("bad/truncated_mid_flatbuffer.pte");
    let o = run(&["--model", bad.to_str().unwrap(), "--audio", wav.to_str().unwrap()]);
    fails_with(&o, &["truncated_mid_flatbuffer.pte"]);
    // A valid program that is not a Whisper program: the missing method is named.
    let other = testdata("bad/base.pte");
    let o = run(&["--model", other.to_str().unwrap(), "--audio", wav.to_str().unwrap()]);
    fails_with(&o, &["base.pte", "method"]);
}

#[test]
fn argument_errors() {
    let wav = testdata("models/audio/fox_16k.wav");
    let w = wav.to_str().unwrap();
    fails_with(&run(&["--model", "m.pte"]), &["--audio"]);
    fails_with(&run(&["--model", "m.pte", "--audio", w, "--temperature", "-1"]), &["--temperature"]);
    fails_with(&run(&["--model", "m.pte", "--audio", w, "-t", "0"]), &["--threads"]);
    fails_with(&run(&["--model", "m.pte", "--audio", w, "--output-format", "docx"]), &["docx"]);
    let d = temp_dir("cli-args");
    let missing = d.join("nope.wav");
    fails_with(&run(&["--model", "m.pte", "--audio", missing.to_str().unwrap()]), &["nope.wav"]);
}

#[test]
fn help_lists_the_whisper_cpp_spellings() {
    let o = run(&["--help"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for flag in ["--audio", "--language", "--timestamps", "--output-format", "--verify-input", "-osrt"] {
        assert!(out.contains(flag), "{flag}");
    }
    // -osrt and -tr parse (then fail on the missing program, not on the flags).
    let wav = testdata("models/audio/fox_16k.wav");
    let o = run(&["--model", "/nonexistent/m.pte", "--audio", wav.to_str().unwrap(), "-osrt", "-tr", "-l", "de"]);
    fails_with(&o, &["/nonexistent/m.pte"]);
}
