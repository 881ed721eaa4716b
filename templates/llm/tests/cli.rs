//! The built binary end to end on hand-built programs with the LLM signature (see
//! `common::Toy`) and llama_tiny's tokenizer: greedy tokens as predicted, positions passed
//! right, EOS, budgets, chat, text and JSON output, and clean failures (exit 1, no panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rbuild_runner_support::text::tokenizer::{self, Tokenizer};

mod common;
use common::{temp_dir, testdata, Toy};

const BIN: &str = env!("CARGO_BIN_EXE_llama_runner");

fn tokenizer_path() -> String {
    testdata("models/llama_tiny/tokenizer.json")
}

fn tok() -> Box<dyn Tokenizer> {
    tokenizer::load(Path::new(&tokenizer_path())).unwrap()
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run llama_runner")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "failed: {}", stderr(o));
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    serde_json::from_str(&out).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn program(name: &str, toy: &Toy) -> (PathBuf, String) {
    let dir = temp_dir(name);
    let p = toy.write(&dir, "model.pte");
    let s = p.to_string_lossy().into_owned();
    (dir, s)
}

const PROMPT: &str = "The quick brown fox";

#[test]
fn kv_program_greedy_tokens_and_positions() {
    let prompt = tok().encode(PROMPT, true).unwrap();
    let mut toy = Toy::new(true);
    // Calls starting at these positions are steered: the prefill (0) and two decode steps.
    let n = prompt.len();
    toy.bias = vec![(0, 300), (n + 1, 40), (n + 4, 77)];
    let (_d, model) = program("cli_kv", &toy);
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "8", "--json"]);
    let j = json(&o);
    assert_eq!(ids(&j["prompt_token_ids"]), prompt);
    let want = toy.simulate(&prompt, 8, &[2]);
    assert_eq!(want[0], 300);
    assert_eq!(want[2], 40);
    assert_eq!(want[5], 77);
    assert_eq!(ids(&j["generated_token_ids"]), want);
    assert_eq!(j["text"].as_str().unwrap(), tok().decode(&want, true).unwrap());
    let st = &j["stats"];
    assert_eq!(st["prefill_tokens"].as_u64().unwrap() as usize, n);
    assert_eq!(st["decode_tokens"].as_u64().unwrap(), 7);
    for k in ["load_ms", "ttft_ms", "prefill_tok_s", "decode_tok_s", "peak_rss_bytes"] {
        assert!(st[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {}", st[k]);
    }
    assert_eq!(j["stop"], "length");
    // More threads, same tokens.
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "8", "--json", "--threads", "2"]);
    assert_eq!(ids(&json(&o)["generated_token_ids"]), want);
}

#[test]
fn eos_from_the_program_stops_unless_ignored() {
    let prompt = tok().encode(PROMPT, true).unwrap();
    let mut toy = Toy::new(true);
    toy.eos_ids = vec![2, 5];
    toy.bias = vec![(prompt.len() + 2, 5)];
    let (_d, model) = program("cli_eos", &toy);
    let base = ["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "10", "--json"];
    let j = json(&run(&base));
    let g = ids(&j["generated_token_ids"]);
    assert_eq!(g.len(), 4, "{g:?}");
    assert_eq!(*g.last().unwrap(), 5);
    assert_eq!(g, toy.simulate(&prompt, 10, &[2, 5]));
    assert_eq!(j["stop"], "eos");
    let mut args = base.to_vec();
    args.push("--ignore-eos");
    let g = ids(&json(&run(&args))["generated_token_ids"]);
    assert_eq!(g.len(), 10);
    assert_eq!(g, toy.simulate(&prompt, 10, &[]));
}

#[test]
fn program_without_kv_cache() {
    let prompt = tok().encode(PROMPT, true).unwrap();
    let toy = Toy::new(false);
    let (_d, model) = program("cli_nokv", &toy);
    let j = json(&run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "5", "--json"]));
    let want = toy.simulate(&prompt, 5, &[2]);
    assert_eq!(ids(&j["generated_token_ids"]), want);
    // Without getters either: limits come from the input's bound, EOS from the tokenizer.
    let mut bare = Toy::new(false);
    bare.getters = false;
    let (_d2, model) = program("cli_bare", &bare);
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("get_eos_ids"), "{}", stderr(&o));
}

#[test]
fn text_output_streams_and_stats_go_to_stderr() {
    let prompt = tok().encode(PROMPT, true).unwrap();
    let toy = Toy::new(true);
    let (_d, model) = program("cli_text", &toy);
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "6"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = tok().decode(&toy.simulate(&prompt, 6, &[2]), true).unwrap();
    assert_eq!(String::from_utf8(o.stdout.clone()).unwrap(), format!("{want}\n"));
    let err = stderr(&o);
    for k in ["load", "time to first token", "prefill", "decode", "tok/s", "peak memory"] {
        assert!(err.contains(k), "{k} missing from {err}");
    }
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", "6", "--echo"]);
    assert_eq!(String::from_utf8(o.stdout).unwrap(), format!("{PROMPT}{want}\n"));
}

#[test]
fn sampling_is_reproducible_with_a_seed() {
    let mut toy = Toy::new(true);
    // Several equally likely tokens at each step make the draw matter.
    toy.bias.clear();
    let (_d, model) = program("cli_seed", &toy);
    let tp = tokenizer_path();
    let go = |seed: &str, extra: &[&str]| {
        let mut args = vec!["--model", &model, "--tokenizer", &tp, "--prompt", PROMPT, "--temperature", "5", "--top-p", "1", "--seed", seed, "--max-new-tokens", "12", "--ignore-eos", "--json"];
        args.extend_from_slice(extra);
        ids(&json(&run(&args))["generated_token_ids"])
    };
    let a = go("7", &[]);
    assert_eq!(a, go("7", &[]));
    assert_ne!(a, go("8", &[]));
    // A warm-up run does not consume the reported run's random draws.
    assert_eq!(a, go("7", &["--warmup"]));
}

#[test]
fn prompt_file_and_chat_template() {
    let dir = temp_dir("cli_chat");
    std::fs::copy(tokenizer_path(), dir.join("tokenizer.json")).unwrap();
    let toy = Toy::new(true);
    let model = toy.write(&dir, "model.pte");
    let tokp = dir.join("tokenizer.json");
    let pf = dir.join("prompt.txt");
    std::fs::write(&pf, "Hello, world!").unwrap();
    let args = |extra: &[&str]| {
        let mut v: Vec<String> = ["--model", model.to_str().unwrap(), "--tokenizer", tokp.to_str().unwrap(), "--prompt-file", pf.to_str().unwrap(), "--temperature", "0", "--max-new-tokens", "3", "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let j = json(&Command::new(BIN).args(args(&[])).output().unwrap());
    assert_eq!(ids(&j["prompt_token_ids"]), tok().encode("Hello, world!", true).unwrap());
    // --chat without a template: a clear error.
    let o = Command::new(BIN).args(args(&["--chat"])).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("chat_template"), "{}", stderr(&o));
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::json!({"bos_token": "<s>", "eos_token": "</s>",
            "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[assistant]:{% endif %}"})
        .to_string(),
    )
    .unwrap();
    let j = json(&Command::new(BIN).args(args(&["--chat"])).output().unwrap());
    // The template writes the BOS itself; it is matched as the special token, not re-added.
    let want = tok().encode("<s>[user]: Hello, world!\n[assistant]:", false).unwrap();
    assert_eq!(want[0], 1);
    assert_eq!(ids(&j["prompt_token_ids"]), want);
}

#[test]
fn tiktoken_tokenizer_with_a_llama3_chat_template() {
    let dir = temp_dir("cli_tiktoken");
    let tokp = dir.join("tokenizer.model");
    std::fs::write(&tokp, common::rank_file()).unwrap();
    let template = "{{- bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::json!({"chat_template": template, "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}).to_string(),
    )
    .unwrap();
    let tok = tokenizer::load(&tokp).unwrap();
    assert_eq!(tok.kind(), "tiktoken");
    let (bos, sh, eh, eot) = (265, 271, 272, 274);
    let mut want_prompt = vec![bos, sh];
    want_prompt.extend(tok.encode("user", false).unwrap());
    want_prompt.push(eh);
    want_prompt.extend(tok.encode("\n\nhello world", false).unwrap());
    want_prompt.extend([eot, sh]);
    want_prompt.extend(tok.encode("assistant", false).unwrap());
    want_prompt.push(eh);
    want_prompt.extend(tok.encode("\n\n", false).unwrap());
    // A program over this vocabulary that answers "hello" and then ends its turn.
    let mut toy = Toy::new(true);
    toy.vocab = 600;
    toy.eos_ids = vec![eot as i64, 266];
    let n = want_prompt.len();
    toy.bias = vec![(0, b'h' as usize), (n, b'e' as usize), (n + 1, 257), (n + 2, b'o' as usize), (n + 3, eot as usize)];
    let model = toy.write(&dir, "model.pte");
    let o = run(&["--model", model.to_str().unwrap(), "--tokenizer", tokp.to_str().unwrap(), "--prompt", " hello world ", "--chat", "--temperature", "0", "--max-new-tokens", "10", "--json"]);
    let j = json(&o);
    assert_eq!(ids(&j["prompt_token_ids"]), want_prompt);
    assert_eq!(ids(&j["generated_token_ids"]), vec![b'h' as u32, b'e' as u32, 257, b'o' as u32, eot]);
    assert_eq!(j["text"], "hello");
    assert_eq!(j["stop"], "eos");
}

#[test]
fn sequence_budget_is_checked_before_running() {
    let prompt = tok().encode(PROMPT, true).unwrap();
    let toy = Toy::new(true); // max_seq_len 48
    let (_d, model) = program("cli_budget", &toy);
    let too_many = (48 - prompt.len() + 1).to_string();
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--max-new-tokens", &too_many]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains(&prompt.len().to_string()) && e.contains(&too_many) && e.contains("49") && e.contains("48"), "{e}");
    assert!(e.contains("model.pte"), "{e}");
    assert!(o.stdout.is_empty());
    // Exactly filling it is fine; without --max-new-tokens the rest of the context is used.
    let fill = (48 - prompt.len()).to_string();
    let j = json(&run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--max-new-tokens", &fill, "--ignore-eos", "--json"]));
    assert_eq!(ids(&j["generated_token_ids"]).len(), 48 - prompt.len());
    let j = json(&run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--temperature", "0", "--ignore-eos", "--json"]));
    assert_eq!(ids(&j["generated_token_ids"]).len(), 48 - prompt.len());
    // get_max_context_len, when present, is the limit.
    let mut toy = Toy::new(true);
    toy.max_context_len = Some(20);
    let (_d2, model) = program("cli_ctx", &toy);
    let o = run(&["--model", &model, "--tokenizer", &tokenizer_path(), "--prompt", PROMPT, "--max-new-tokens", "16"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("20"), "{}", stderr(&o));
}

#[test]
fn failures_exit_1_with_the_file_or_argument_named() {
    let (dir, model) = program("cli_fail", &Toy::new(true));
    let tp = tokenizer_path();
    let check = |args: &[&str], needle: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {needle:?} not in {e}");
        assert!(!e.contains("panicked"), "{e}");
    };
    check(&["--model", "/nonexistent/m.pte", "--tokenizer", &tp, "--prompt", "x"], "/nonexistent/m.pte");
    check(&["--model", &model, "--tokenizer", "/nonexistent/t.json", "--prompt", "x"], "/nonexistent/t.json");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt-file", "/nonexistent/p.txt"], "/nonexistent/p.txt");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt", "x", "--top-p", "0"], "--top-p");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt", "x", "--temperature", "-1"], "--temperature");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt", "x", "--max-new-tokens", "0"], "--max-new-tokens");
    check(&["--model", &model, "--tokenizer", &tp], "--prompt");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt", "x", "--bogus"], "--bogus");
    check(&["--model", &model, "--tokenizer", &tp, "--prompt", "x", "--prefill-chunk", "0"], "--prefill-chunk");
    let (_d, nokv) = program("cli_fail_nokv", &Toy::new(false));
    check(&["--model", &nokv, "--tokenizer", &tp, "--prompt", "x", "--prefill-chunk", "4"], "KV cache");
    // Not a program / a program with another signature.
    let junk = dir.join("junk.pte");
    std::fs::write(&junk, b"definitely not a program").unwrap();
    check(&["--model", junk.to_str().unwrap(), "--tokenizer", &tp, "--prompt", "x"], "junk.pte");
    check(&["--model", &testdata("models/mobilenet_v2/model.pte"), "--tokenizer", &tp, "--prompt", "x"], "tokens");
    // A tokenizer whose ids exceed the program's vocabulary.
    let mut small = Toy::new(true);
    small.vocab = 64;
    let sm = small.write(&dir, "small.pte");
    check(&["--model", sm.to_str().unwrap(), "--tokenizer", &tp, "--prompt", PROMPT], "vocabulary");
}

#[test]
fn lists_kernels() {
    let o = run(&["--list-kernels"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.lines().any(|l| l == "aten::embedding.out"), "{out}");
}

#[test]
fn model_is_required_without_an_embedded_program() {
    if cfg!(feature = "embed-program") {
        return; // the binary may carry a program
    }
    let o = run(&["--tokenizer", &tokenizer_path(), "--prompt", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--model"), "{}", stderr(&o));
}

#[test]
fn malformed_programs_fail_cleanly() {
    let dir = std::path::PathBuf::from(testdata("bad"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pte") && n != "base.pte" && n != "bad_ext_header_magic.pte")
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for bad in &names {
        let p = testdata(&format!("bad/{bad}"));
        let o = run(&["--model", &p, "--tokenizer", &tokenizer_path(), "--prompt", "x"]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        let e = stderr(&o);
        assert!(e.contains(bad.as_str()) && !e.contains("panicked"), "{bad}: {e}");
    }
    // The shared bad tokenizer files.
    let (_d, model) = program("cli_bad_tok", &Toy::new(true));
    for bad in ["tokenizer_not_json.json", "tokenizer_truncated.json", "tokenizer_missing_vocab.json"] {
        let p = testdata(&format!("bad/{bad}"));
        let o = run(&["--model", &model, "--tokenizer", &p, "--prompt", "x"]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        let e = stderr(&o);
        assert!(e.contains(bad) && !e.contains("panicked"), "{bad}: {e}");
    }
}
