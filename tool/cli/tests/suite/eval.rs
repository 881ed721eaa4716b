//! `rbuild eval` and the recipes' accuracy gates end to end: perplexity of the shared tiny Llama
//! against an independent computation (the Core-ATen export run by ExecuTorch's runtime, the
//! llama-perplexity arithmetic in numpy), every logits path agreeing; top-1/top-5 over class
//! folders of the shared images; and a recipe whose int4 build fails its perplexity gate when
//! the limit is below its regression and passes, with the table in the manifest, when it is not.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

/// Runs rbuild; (success, stdout, stderr).
fn rbuild_in(env: &[(&str, &Path)], args: &[&str]) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rbuild"));
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.env_remove("RBUILD_TEST_HOLD").args(args).output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn rbuild(args: &[&str]) -> String {
    let (ok, out, err) = rbuild_in(&[], args);
    assert!(ok, "rbuild {args:?} failed:\n{out}{err}");
    out
}

fn eval_json(args: &[&str]) -> serde_json::Value {
    let out = rbuild(&[&["eval", "--json"][..], args].concat());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// About 170 words of plain English: enough tokens for several chunks of 16.
const TEXT: &str = "The quick brown fox jumps over the lazy dog. A small model reads this text one chunk at a \
time and guesses every next word from the words before it. Perplexity measures how surprised it is: the \
exponential of the mean negative log-likelihood of the words it had to predict. Lower is better, and a model \
that guesses uniformly over its vocabulary scores the size of that vocabulary. Quantizing the weights to four \
bits makes the model smaller and faster, but it also moves its predictions a little, and the question a build \
has to answer is whether it moved them too far. So the build measures the program it made and the program it \
would have made without quantization, on the same text, and fails when the difference is above the limit the \
recipe sets. Nothing here depends on the text being true or interesting; it only has to be long enough to fill \
a few chunks, and written in the language the tokenizer was trained on.";

fn export_llama(out: &Path, extra: &[&str]) {
    let dir = testdata().join("models/llama_tiny");
    rbuild(&[&["export", "--model", "llama", "--weights", dir.to_str().unwrap(), "--out", out.to_str().unwrap()][..], extra].concat());
}

/// llama-perplexity over `tokens` with ExecuTorch running `pte` (a Core-ATen full-sequence
/// program of exactly `ctx` tokens), the arithmetic in numpy.
const ORACLE: &str = r#"
import json, sys
import numpy as np
import executorch_numpy_runtime as et
pte, spec = sys.argv[1], json.load(open(sys.argv[2]))
tokens, bos, ctx = spec["tokens"], spec["bos"], spec["ctx"]
program = et.Runtime.get().load_program(open(pte, "rb").read())
nll, count = 0.0, 0
for c in range(len(tokens) // ctx):
    chunk = list(tokens[c * ctx:(c + 1) * ctx])
    if bos is not None:
        chunk[0] = bos
    logits = program.load_method("forward")([np.array([chunk], dtype=np.int64)])[0][0].astype(np.float64)
    for i in range(ctx // 2, ctx - 1):
        row = logits[i]
        top = row.max()
        nll += top + np.log(np.exp(row - top).sum()) - row[tokens[c * ctx + i + 1]]
        count += 1
print(json.dumps({"perplexity": float(np.exp(nll / count)), "scored": count}))
"#;

#[test]
fn perplexity_matches_executorch_and_every_logits_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = testdata().join("models/llama_tiny");
    let tokenizer = dir.join("tokenizer.json");
    let text = tmp.path().join("text.txt");
    std::fs::write(&text, TEXT).unwrap();
    let (full, last, core) = (tmp.path().join("full.pte"), tmp.path().join("last.pte"), tmp.path().join("core.pte"));
    export_llama(&full, &["--max-seq-len", "64", "--full-logits"]);
    export_llama(&last, &["--max-seq-len", "64"]);
    export_llama(&core, &["--core-aten", "--max-seq-len", "16"]);
    let common_args = ["--tokenizer", tokenizer.to_str().unwrap(), "--text", text.to_str().unwrap(), "--ctx", "16"];
    let eval = |p: &Path| eval_json(&[&[p.to_str().unwrap()][..], &common_args[..]].concat());
    let (a, b, c) = (eval(&full), eval(&last), eval(&core));
    eprintln!("full-logits: {a}\nlast-row: {b}\ncore-aten: {c}");
    assert_eq!((a["metric"].as_str(), a["logits_path"].as_str()), (Some("perplexity"), Some("all-rows")));
    assert_eq!(b["logits_path"], "token-by-token");
    assert_eq!(c["logits_path"], "all-rows");
    let chunks = a["chunks"].as_u64().unwrap();
    assert!(chunks >= 3, "{a}");
    assert_eq!(a["scored_tokens"].as_u64(), Some(chunks * 7), "positions 8..15 of each chunk of 16");
    assert_eq!(a["bos"], 1);
    let ppl = a["value"].as_f64().unwrap();
    let close = |x: &serde_json::Value, tol: f64| ((x["value"].as_f64().unwrap() - ppl) / ppl).abs() < tol;
    assert!(close(&b, 1e-5) && close(&c, 1e-5), "logits paths disagree: {a} {b} {c}");

    // The independent computation: the same tokens, ExecuTorch's logits, numpy's arithmetic.
    let Some(python) = common::oracle_python() else { return };
    let tok = rbuild_runner_support::text::tokenizer::load(&tokenizer).unwrap();
    let mut tokens = vec![1u32];
    tokens.extend(tok.encode(TEXT, false).unwrap());
    assert_eq!(a["tokens"].as_u64(), Some(tokens.len() as u64));
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, serde_json::json!({"tokens": tokens, "bos": 1, "ctx": 16}).to_string()).unwrap();
    let script = tmp.path().join("ppl.py");
    std::fs::write(&script, ORACLE).unwrap();
    let o = Command::new(python).arg(&script).arg(&core).arg(&spec).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let want_ppl = want["perplexity"].as_f64().unwrap();
    eprintln!("ExecuTorch + numpy: {want}; rbuild eval: {ppl}");
    assert_eq!(want["scored"], a["scored_tokens"]);
    assert!(((ppl - want_ppl) / want_ppl).abs() < 1e-4, "rbuild eval {ppl} vs ExecuTorch + numpy {want_ppl}");
}

#[test]
fn eval_errors_name_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = testdata().join("models/llama_tiny");
    let tokenizer = dir.join("tokenizer.json");
    let short = tmp.path().join("short.txt");
    std::fs::write(&short, "Too short for two chunks.").unwrap();
    let pte = dir.join("model.pte");
    let mobilenet = testdata().join("models/mobilenet_v2/model.pte");
    let fails = |args: &[&str]| {
        let (ok, out, err) = rbuild_in(&[], &[&["eval"][..], args].concat());
        assert!(!ok, "rbuild eval {args:?} should fail:\n{out}");
        err
    };
    let (t, s) = (tokenizer.to_str().unwrap(), short.to_str().unwrap());
    let err = fails(&[pte.to_str().unwrap(), "--tokenizer", t, "--text", s]);
    assert!(err.contains("short.txt") && err.contains("needs at least"), "{err}");
    let err = fails(&[pte.to_str().unwrap(), "--tokenizer", t, "--text", "/nonexistent/wiki.txt"]);
    assert!(err.contains("/nonexistent/wiki.txt"), "{err}");
    let err = fails(&[mobilenet.to_str().unwrap(), "--tokenizer", t, "--text", s]);
    assert!(err.contains("model.pte") && err.contains("not a language model"), "{err}");
    let err = fails(&[pte.to_str().unwrap(), "--image-dir", tmp.path().to_str().unwrap()]);
    assert!(err.contains("no class subfolders"), "{err}");
    let err = fails(&[mobilenet.to_str().unwrap(), "--tokenizer", t, "--audio-dir", tmp.path().to_str().unwrap()]);
    assert!(err.contains("no .wav files"), "{err}");
}

/// The classes of `pte` for the testdata image `name`, best first, from `rbuild run` on the
/// torchvision-preprocessed tensor (the pipeline the eval reproduces bit for bit).
fn ranked_classes(pte: &Path, name: &str, tmp: &Path) -> Vec<usize> {
    let pre = std::fs::read(testdata().join(format!("models/images/{name}.preprocessed.safetensors"))).unwrap();
    let st = safetensors::SafeTensors::deserialize(&pre).unwrap();
    let t = st.tensor("pil.normalized").unwrap();
    let view = safetensors::tensor::TensorView::new(t.dtype(), t.shape().to_vec(), t.data()).unwrap();
    let (input, output) = (tmp.join(format!("{name}.in.safetensors")), tmp.join(format!("{name}.out.safetensors")));
    std::fs::write(&input, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
    rbuild(&["run", pte.to_str().unwrap(), "--inputs", input.to_str().unwrap(), "--output", output.to_str().unwrap()]);
    let out = std::fs::read(&output).unwrap();
    let st = safetensors::SafeTensors::deserialize(&out).unwrap();
    let logits: Vec<f32> = st.tensor("output.0").unwrap().data().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    order
}

#[test]
fn top_k_over_class_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let pte = testdata().join("models/mobilenet_v2/model.pte");
    let names = ["img1_gradients_w320_h256", "img2_shapes_w300_h300", "img3_wide_w480_h360"];
    let ranked: Vec<Vec<usize>> = names.iter().map(|n| ranked_classes(&pte, n, tmp.path())).collect();
    // img1 in its best class, img2 in its third (a top-5 hit only), img3 in its last.
    let classes = [ranked[0][0], ranked[1][2], ranked[2][999]];
    let images = tmp.path().join("val");
    let labels = tmp.path().join("labels.txt");
    std::fs::write(&labels, (0..1000).map(|i| format!("class{i}\n")).collect::<String>()).unwrap();
    for (i, (name, class)) in names.iter().zip(classes).enumerate() {
        // Folders by index, by label, and by label in other case.
        let folder = match i {
            0 => class.to_string(),
            1 => format!("class{class}"),
            _ => format!("CLASS{class}"),
        };
        std::fs::create_dir_all(images.join(&folder)).unwrap();
        std::fs::copy(testdata().join(format!("models/images/{name}.png")), images.join(&folder).join(format!("{name}.png"))).unwrap();
    }
    let r = eval_json(&[pte.to_str().unwrap(), "--image-dir", images.to_str().unwrap(), "--labels", labels.to_str().unwrap()]);
    eprintln!("{r}");
    assert_eq!((r["metric"].as_str(), r["images"].as_u64(), r["top1_correct"].as_u64(), r["top5_correct"].as_u64()), (Some("top1"), Some(3), Some(1), Some(2)));
    assert!((r["value"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12 && (r["top5"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12, "{r}");
}

/// The shipped llama-cpu recipe on the tiny checkpoint, int4, with a perplexity gate.
fn gated_recipe(weights: &Path, limit: &str) -> String {
    let shipped = std::fs::read_to_string(common::repo().join("recipes/llama-cpu.kdl")).unwrap();
    // The model block's weights, size and quantization lines, whatever their shipped values.
    let line = |l: &str| match l.trim_start().split_whitespace().next() {
        Some("weights") => format!("    weights \"{}\"", weights.display()),
        Some("max-seq-len") => "    max-seq-len 64\n    full-logits #true".to_string(),
        Some("quantize") => "    quantize \"int4\"".to_string(),
        _ => l.to_string(),
    };
    let recipe: String = shipped.lines().map(|l| line(l) + "\n").collect();
    assert!(recipe.contains(&format!("weights \"{}\"", weights.display())) && recipe.contains("full-logits"), "llama-cpu.kdl changed:\n{recipe}");
    format!(
        "{recipe}\nverify {{\n    accuracy {{\n        data \"wiki.txt\"\n        metric \"perplexity\"\n        reference \"fp32\"\n        max-regression \"{limit}\"\n        ctx 16\n    }}\n}}\n"
    )
}

#[test]
fn accuracy_gate_passes_within_its_limit_and_fails_beyond() {
    let project = common::project_linking(&["toolchains", "templates"]);
    let recipes = project.path().join("recipes");
    std::fs::create_dir(&recipes).unwrap();
    std::fs::write(recipes.join("wiki.txt"), TEXT).unwrap();
    let out = project.path().join("out");
    let weights = testdata().join("models/llama_tiny");
    let recipe = recipes.join("llama-gate.kdl");
    // RBUILD_TARGET_DIR, when the suite sets it, is inherited: the runner builds share it.
    let env: [(&str, &Path); 2] = [("RBUILD_ROOT", project.path()), ("RBUILD_OUT", &out)];

    // A generous limit: the build passes, prints the table and records it.
    std::fs::write(&recipe, gated_recipe(&weights, "1000%")).unwrap();
    let (ok, stdout, stderr) = rbuild_in(&env, &["llama-gate", "platform=host"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("accuracy gate on") && stdout.contains("perplexity") && stdout.contains("pass"), "{stdout}");
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("llama-gate/host/manifest.json")).unwrap()).unwrap();
    let table = &manifest["accuracy"];
    eprintln!("{table:#}");
    assert_eq!((table["metric"].as_str(), table["passed"].as_bool(), table["max_regression"].as_f64()), (Some("perplexity"), Some(true), Some(10.0)));
    let (reference, built, regression) = (table["reference_value"].as_f64().unwrap(), table["value"].as_f64().unwrap(), table["regression"].as_f64().unwrap());
    assert!(((built - reference) / reference - regression).abs() < 1e-12, "{table}");
    assert!(regression > 0.0, "int4 should cost some perplexity: {table}");
    assert_eq!(table["counts"]["logits_path"], "all-rows");
    assert_eq!(table["reference_program"], "reference-fp32.pte");

    // A limit below the int4 regression: the build fails, naming the metric, both values and
    // the limit, before any runner is rebuilt.
    let limit = format!("{:.4}%", regression * 50.0);
    std::fs::write(&recipe, gated_recipe(&weights, &limit)).unwrap();
    let (ok, stdout, stderr) = rbuild_in(&env, &["llama-gate", "platform=host"]);
    assert!(!ok, "the gate should fail at {limit}:\n{stdout}{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("accuracy gate failed: perplexity"), "{all}");
    assert!(all.contains(&format!("{built:.4}")) && all.contains(&format!("{reference:.4}")), "{all}");
    assert!(all.contains("above the limit of"), "{all}");
    // The reference export was cached from the first build.
    assert!(all.lines().any(|l| l.starts_with("reference-export") && l.contains("cached")), "{all}");
}

#[test]
fn word_error_rate_of_the_demo_whisper() {
    let tmp = tempfile::tempdir().unwrap();
    let pte = tmp.path().join("whisper.pte");
    rbuild(&["export", "--model", "whisper", "--random-weights", "7", "--out", pte.to_str().unwrap()]);
    let family = rbuild_models::family::family("whisper").unwrap();
    let tokenizer = tmp.path().join("tokenizer.json");
    std::fs::write(&tokenizer, family.demo_tokenizer_json().unwrap()).unwrap();
    let audio = tmp.path().join("audio");
    std::fs::create_dir(&audio).unwrap();
    for (name, bytes) in family.runner_files() {
        std::fs::write(audio.join(name), bytes).unwrap();
    }
    let transcript = audio.join("demo.txt");
    let wer = |reference: &str| {
        std::fs::write(&transcript, reference).unwrap();
        eval_json(&[pte.to_str().unwrap(), "--audio-dir", audio.to_str().unwrap()])
    };
    // What the demo says, normalized; then that as the reference (no errors), then with a word
    // more than it says (one deletion).
    let first = wer("placeholder");
    let said = first["per_file"][0]["hypothesis"].as_str().unwrap().to_string();
    let words = said.split_whitespace().count();
    assert!(words > 0, "the demo transcribes to no words: {first}");
    let exact = wer(&said.to_uppercase());
    assert_eq!((exact["value"].as_f64(), exact["words"].as_u64(), exact["files"].as_u64()), (Some(0.0), Some(words as u64), Some(1)), "{exact}");
    let longer = wer(&format!("{said} Extraordinary!"));
    assert_eq!((longer["deletions"].as_u64(), longer["words"].as_u64()), (Some(1), Some(words as u64 + 1)), "{longer}");
    assert!((longer["value"].as_f64().unwrap() - 1.0 / (words as f64 + 1.0)).abs() < 1e-12, "{longer}");
}
