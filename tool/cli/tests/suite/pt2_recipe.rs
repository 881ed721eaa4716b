//! `.pt2` archives through recipes (`model "pt2" { archive … }`): the testdata's MobileNetV2
//! and Llama archives (training and core-ATen IR) build for the host with the generic
//! tensor-io runner, and the bundled runner matches each archive's io; the imported MobileNetV2
//! builds int8 for the Ethos-U55 into the very program the built-in definition gives on the
//! same weights; and the shipped example recipe loads.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compare, repo, testdata};
use safetensors::SafeTensors;

/// A project folder with the repo's templates and toolchains and the given recipes.
fn project(recipes: &[(&str, String)]) -> tempfile::TempDir {
    let root = common::project_linking(&["templates", "toolchains"]);
    std::fs::create_dir(root.path().join("recipes")).unwrap();
    for (name, text) in recipes {
        std::fs::write(root.path().join(format!("recipes/{name}.kdl")), text).unwrap();
    }
    root
}

fn rbuild(dir: &Path, out: &Path, args: &[&str]) -> (bool, String) {
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    // Vela lives in the test venv.
    let venv = repo().join(".venv/bin");
    if venv.is_dir() {
        path = std::env::join_paths(std::iter::once(venv).chain(std::env::split_paths(&path))).unwrap();
    }
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).current_dir(dir).env("RBUILD_OUT", out).env("PATH", path).args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn archive(name: &str) -> PathBuf {
    testdata().join("pt2").join(name).canonicalize().unwrap()
}

#[test]
fn testdata_archives_build_through_recipes_and_their_runner_matches_the_io() {
    let cases = ["mobilenet_v2", "llama_tiny_fullseq", "llama_tiny_fullseq.core_aten"];
    let recipes: Vec<(&str, String)> = cases
        .iter()
        .map(|c| {
            let text = format!(
                "description \"imported {c}\"\nmodel \"pt2\" {{\n    archive \"{}\"\n}}\nbackend \"cpu\"\nplatforms \"host\"\n",
                archive(&format!("{c}.pt2")).display()
            );
            (*c, text)
        })
        .collect();
    let recipes: Vec<(&str, String)> = recipes.into_iter().map(|(c, t)| (if c.contains('.') { "llama-core-aten" } else { c }, t)).collect();
    let root = project(&recipes);
    let out = root.path().join("out");
    for ((recipe, _), case) in recipes.iter().zip(cases) {
        let (ok, log) = rbuild(root.path(), &out, &[recipe]);
        assert!(ok, "{recipe}: {log}");
        let host = out.join(recipe).join("host");
        let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(host.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["runner"], "tensor-io", "{manifest}");

        let io = testdata().join("pt2").join(format!("{case}.io.safetensors"));
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(testdata().join("pt2").join(format!("{case}.json"))).unwrap()).unwrap();
        let got_path = out.join(format!("{recipe}.outputs.safetensors"));
        let bundle = host.join("bundle");
        let run = Command::new(bundle.join("pte_runner"))
            .arg("--model")
            .arg(bundle.join("model.pte"))
            .arg("--inputs")
            .arg(&io)
            .arg("--output")
            .arg(&got_path)
            .output()
            .unwrap();
        assert!(run.status.success(), "{recipe}: {}", String::from_utf8_lossy(&run.stderr));
        let (got, want) = (std::fs::read(&got_path).unwrap(), std::fs::read(&io).unwrap());
        let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
        assert_eq!(compare("output.0", &got, &want, &meta), None, "{recipe}");
    }
}

#[test]
fn imported_mobilenet_builds_for_ethos_u_into_the_built_in_program() {
    if !repo().join(".venv/bin/vela").is_file() {
        assert!(std::env::var_os("CI").is_none(), "CI must install Vela (tool/ci/setup.sh)");
        println!("SKIPPED: no .venv/bin/vela");
        return;
    }
    let npu = "backend \"ethos-u\" {\n    accelerator \"ethos-u55-128\"\n    fallback \"deny\"\n}\nrunner \"firmware\" {\n    embed-program #true\n}\nplatforms \"corstone-300\"\n";
    let imported = format!("model \"pt2\" {{\n    archive \"{}\"\n    quantize \"int8\"\n}}\n{npu}", archive("mobilenet_v2.pt2").display());
    let weights = testdata().join("models/mobilenet_v2/model.safetensors").canonicalize().unwrap();
    let built_in =
        format!("model \"mobilenet_v2\" {{\n    weights \"{}\"\n    input-shape 1 3 224 224\n    quantize \"int8\"\n}}\n{npu}", weights.display());
    let root = project(&[("imported-ethosu", imported), ("built-in-ethosu", built_in)]);
    let out = root.path().join("out");
    for recipe in ["imported-ethosu", "built-in-ethosu"] {
        let (ok, log) = rbuild(root.path(), &out, &[recipe, "--strict"]);
        assert!(ok, "{recipe}: {log}");
        assert!(log.contains("65 ops on the NPU in 1 subgraph(s), 0 on the CPU"), "{recipe}: {log}");
    }
    for file in ["model.pte", "model-cpu-lowering.pte"] {
        let read = |recipe: &str| std::fs::read(out.join(recipe).join("program").join(file)).unwrap();
        assert!(read("imported-ethosu") == read("built-in-ethosu"), "{file}: the imported program differs from the built-in one");
    }
}

#[test]
fn the_example_recipe_names_its_missing_archive() {
    let recipe = std::fs::read_to_string(repo().join("recipes/mobilenet-pt2-cpu.kdl")).unwrap();
    let root = project(&[("mobilenet-pt2-cpu", recipe)]);
    let out = root.path().join("out");
    let (ok, log) = rbuild(root.path(), &out, &["mobilenet-pt2-cpu", "platform=host"]);
    assert!(!ok, "{log}");
    assert!(log.contains("mobilenet_v2.pt2") && log.contains("not found") && !log.contains("panicked"), "the missing archive is named: {log}");
    // Planning needs no archive (CI plans every shipped recipe).
    let (ok, log) = rbuild(root.path(), &out, &["plan", "mobilenet-pt2-cpu"]);
    assert!(ok && log.contains("(missing)"), "{log}");
}
