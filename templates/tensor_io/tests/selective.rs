//! This template through rbuild's selective build, as a recipe build makes it: for each model
//! program of the shared testdata (and the small `bad/base` one), a runner crate generated
//! with exactly the program's kernels, compiled in release, run on the case's io file and
//! compared with the reference within the case tolerance; then the program embedded in the
//! binary. The generated crates reach `templates/support` by the absolute path the generator
//! writes, as in a recipe build. Compiles go to `RBUILD_TARGET_DIR` (as recipe builds do) or a
//! target folder kept between test runs.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_clean_failure, cases, mismatches, run, stderr, testdata, Case};
use rbuild_runner_support::tensors;

fn template() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn options(features: &[&str], env: &[(&str, &Path)]) -> rbuild_selective::CompileOptions {
    rbuild_selective::CompileOptions {
        target: None,
        // The recipe tests' shared runner folder when CI sets one (the runtime and kernels then
        // compile once for both), else one kept between runs of this test.
        target_dir: std::env::var_os("RBUILD_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("selective-runners")),
        features: features.iter().map(|f| f.to_string()).collect(),
        env: env.iter().map(|(k, v)| (k.to_string(), v.display().to_string())).collect(),
        release: true,
        bin_rustc_args: Vec::new(),
    }
}

/// Generates and compiles the runner for `case`'s program into `dir`; returns the binary.
fn selective_runner(case: &Case, dir: &Path, features: &[&str], env: &[(&str, &Path)]) -> PathBuf {
    let ops = rbuild_selective::program_ops(&std::fs::read(&case.pte).unwrap()).unwrap();
    let selected = rbuild_selective::select(&ops).unwrap_or_else(|e| panic!("{}: {e}", case.label()));
    let src = rbuild_selective::generate(&template(), dir, "rbuild-tensor-io-selective-test", &selected).unwrap();
    let manifest = std::fs::read_to_string(src.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("\"../support\""), "the support path must be made absolute: {manifest}");
    let bin = dir.join("pte_runner");
    let install = |exe: &Path| std::fs::copy(exe, &bin).map(drop).map_err(|e| e.to_string());
    rbuild_selective::compile(&src, "pte_runner", &options(features, env), install).unwrap_or_else(|e| panic!("{}: {e}", case.label()));
    bin
}

#[test]
fn selectively_built_runners_match_the_reference_and_can_embed_their_program() {
    let mut programs: Vec<Case> = cases(&testdata().join("models")).into_iter().filter(|c| c.delegates().is_empty()).collect();
    programs.extend(cases(&testdata().join("bad")).into_iter().filter(|c| c.pte.ends_with("base.pte")));
    assert!(programs.len() >= 6, "testdata not found at {}", testdata().display());
    let tmp = tempfile::tempdir().unwrap();
    for (k, case) in programs.iter().enumerate() {
        let runner = selective_runner(case, &tmp.path().join(format!("runner-{k}")), &[], &[]);
        // The binary registers exactly the program's kernels.
        let listed = run(&runner, &[&"--list-kernels"]);
        let mut ops: Vec<String> = String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect();
        ops.sort();
        let want: Vec<String> = rbuild_selective::select(&rbuild_selective::program_ops(&std::fs::read(&case.pte).unwrap()).unwrap()).unwrap().into_iter().map(|(op, _)| op).collect();
        assert_eq!(ops, want, "{}", case.label());
        let out = tmp.path().join(format!("out-{k}.safetensors"));
        let o = run(&runner, &[&"--model", &case.pte, &"--inputs", &case.io, &"--output", &out]);
        assert!(o.status.success(), "{}: {}", case.label(), stderr(&o));
        let problems = mismatches(&tensors::read_file(&out).unwrap(), &case.expected(), &case.meta);
        assert!(problems.is_empty(), "{}: {}", case.label(), problems.join("; "));
        // A program needing kernels this runner lacks fails at load, naming them.
        if case.pte.ends_with("base.pte") {
            let other = programs.iter().find(|c| c.pte.ends_with("mobilenet_v2/model.pte")).unwrap();
            let o = run(&runner, &[&"--model", &other.pte]);
            assert_clean_failure(&o, &["model.pte", "no kernel for", "aten::convolution.out"]);
        }
    }

    // The program compiled into the binary.
    let case = programs.iter().find(|c| c.pte.ends_with("base.pte")).unwrap();
    let runner = selective_runner(case, &tmp.path().join("embedded"), &["embed-program"], &[("RBUILD_EMBED_PROGRAM", &case.pte)]);
    let out = tmp.path().join("out.safetensors");
    let o = run(&runner, &[&"--inputs", &case.io, &"--output", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("<embedded program>"));
    assert!(mismatches(&tensors::read_file(&out).unwrap(), &case.expected(), &case.meta).is_empty());
}
