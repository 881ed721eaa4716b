//! Prebuilt ExecuTorch programs through recipes (`model "pte" { program … }`): the testdata's
//! MobileNetV2 programs build for the host with the generic tensor-io runner, pass `rbuild
//! verify`, and the bundled runner matches each program's io; a changed program file rebuilds;
//! a missing file and a file that is not a program fail the build naming the file.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compare, testdata};
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
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).current_dir(dir).env("RBUILD_OUT", out).args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn models() -> PathBuf {
    testdata().join("models/mobilenet_v2").canonicalize().unwrap()
}

fn recipe_text(program: &Path) -> String {
    format!("description \"prebuilt MobileNetV2\"\nmodel \"pte\" {{\n    program \"{}\"\n}}\nbackend \"cpu\"\nplatforms \"host\"\n", program.display())
}

#[test]
fn prebuilt_programs_build_verify_and_match_their_io() {
    let root = project(&[]);
    let out = root.path().join("out");
    for case in ["model", "model.xnnpack"] {
        // A copy, so the test can change the file and see the build notice.
        let program = root.path().join(format!("{case}.pte"));
        // (Written, not copied: the testdata is read-only and a copy would be too.)
        std::fs::write(&program, std::fs::read(models().join(format!("{case}.pte"))).unwrap()).unwrap();
        let recipe = format!("prebuilt-{}", case.replace('.', "-"));
        std::fs::write(root.path().join(format!("recipes/{recipe}.kdl")), recipe_text(&program)).unwrap();

        let (ok, log) = rbuild(root.path(), &out, &[&recipe]);
        assert!(ok, "{recipe}: {log}");
        assert!(log.contains("copy prebuilt program"), "{recipe}: {log}");
        // The program is taken as it is, where an export would have written it.
        let built = out.join(&recipe).join("program/model.pte");
        assert!(std::fs::read(&built).unwrap() == std::fs::read(&program).unwrap(), "{recipe}: the program was changed on the way");
        let host = out.join(&recipe).join("host");
        let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(host.join("manifest.json")).unwrap()).unwrap();
        assert_eq!((&manifest["model"], &manifest["runner"]), (&serde_json::json!("pte"), &serde_json::json!("tensor-io")), "{manifest}");
        let kernels: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join(&recipe).join("program/kernels.json")).unwrap()).unwrap();
        assert!(!kernels["kernels"].as_array().unwrap().is_empty(), "{kernels}");
        if case.contains("xnnpack") {
            // The whole graph is delegated: the runner links the XNNPACK backend and no kernel.
            let ops: Vec<&str> = kernels["kernels"].as_array().unwrap().iter().filter_map(|k| k["op"].as_str()).collect();
            assert_eq!(ops, ["delegate::XnnpackBackend"], "{kernels}");
        }

        let (ok, log) = rbuild(root.path(), &out, &["verify", &recipe]);
        assert!(ok, "{recipe}: rbuild verify: {log}");
        let row = log.lines().find(|l| l.starts_with("host")).unwrap_or_else(|| panic!("{recipe}: {log}"));
        assert!(row.ends_with("pass"), "{recipe}: {log}");

        // The bundled runner on the case's own io (ExecuTorch's outputs).
        let io = models().join(format!("{case}.io.safetensors"));
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(models().join(format!("{case}.json"))).unwrap()).unwrap();
        assert_eq!((meta["atol"].as_f64(), meta["rtol"].as_f64()), (Some(1e-4), Some(1e-4)), "{case}.json");
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
        assert!(want.tensor("output.0").is_ok(), "{case}: no output.0 in its io");
        assert_eq!(compare("output.0", &got, &want, &meta), None, "{recipe}");

        // Nothing changed: nothing runs. A changed program (same name) is exported again.
        let (ok, log) = rbuild(root.path(), &out, &["plan", &recipe]);
        assert!(ok && !log.contains("would run:"), "{recipe}: {log}");
        std::fs::write(&program, std::fs::read(models().join("model.int8.pte")).unwrap()).unwrap();
        let (ok, log) = rbuild(root.path(), &out, &["plan", &recipe]);
        let export = log.lines().find(|l| l.trim_start().starts_with("export ")).unwrap_or_else(|| panic!("{recipe}: {log}"));
        assert!(ok && export.contains("would run"), "{recipe}: a changed program must rebuild: {log}");
    }
}

#[test]
fn a_missing_program_or_a_file_that_is_not_one_fails_naming_it() {
    let root = project(&[]);
    let out = root.path().join("out");
    let missing = root.path().join("no-such-model.pte");
    let text_file = root.path().join("notes.pte");
    std::fs::write(&text_file, "not a program\n").unwrap();
    let safetensors = models().join("model.safetensors");
    let cases = [("missing", &missing, "not found"), ("text", &text_file, "ExecuTorch program"), ("weights", &safetensors, "ExecuTorch program")];
    for (recipe, program, says) in cases {
        std::fs::write(root.path().join(format!("recipes/{recipe}.kdl")), recipe_text(program)).unwrap();
        let (ok, log) = rbuild(root.path(), &out, &[recipe]);
        assert!(!ok, "{recipe}: {log}");
        assert!(log.contains(&program.display().to_string()) && log.contains(says) && !log.contains("panicked"), "{recipe}: the file is named: {log}");
    }
    // Planning needs no program (CI plans every shipped recipe), and `rbuild list` shows the kind.
    let (ok, log) = rbuild(root.path(), &out, &["plan", "missing"]);
    assert!(ok && log.contains("(missing)") && log.contains("copy prebuilt program"), "{log}");
    let (ok, log) = rbuild(root.path(), &out, &["list"]);
    let row = log.lines().find(|l| l.starts_with("missing ")).unwrap_or_else(|| panic!("{log}"));
    assert!(ok && row.contains("pte (prebuilt)"), "{log}");
    // `program=PATH` replaces the recipe's file (relative to the current folder).
    let (ok, log) = rbuild(root.path(), &out, &["plan", "missing", "program=notes.pte"]);
    assert!(ok && log.contains("program = notes.pte sha256:"), "{log}");
}
