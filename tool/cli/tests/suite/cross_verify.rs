//! Platforms beyond the host: Apple/Android requests fail before any work with what to
//! install; `rbuild verify mobilenet-cpu platform=linux-arm64` cross-builds, runs the runner
//! under qemu-aarch64 and compares with the host reference; the bundle checks, detects a
//! truncated file, and comes out byte-identical from a second clean build; a runner that
//! prints nothing fails verification.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

struct Env {
    out: tempfile::TempDir,
    root: Option<PathBuf>,
}

impl Env {
    fn new() -> Env {
        Env { out: tempfile::tempdir().unwrap(), root: None }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rbuild"));
        c.env("RBUILD_OUT", self.out.path()).env_remove("RBUILD_TEST_HOLD").env_remove("RBUILD_ROOT");
        if let Some(root) = &self.root {
            c.env("RBUILD_ROOT", root);
        }
        c.args(args).output().unwrap()
    }

    fn text(o: &Output) -> String {
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        let text = Env::text(&o);
        assert!(o.status.success(), "rbuild {args:?} failed:\n{text}");
        text
    }

    fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        let text = Env::text(&o);
        assert_eq!(o.status.code(), Some(1), "rbuild {args:?} should fail with 1:\n{text}");
        text
    }
}

#[test]
fn apple_and_android_platforms_fail_before_any_work_saying_what_to_install() {
    let env = Env::new();
    let cases: &[(&str, &[&str])] = &[
        ("macos-arm64", &["builds only on macOS", "xcode-select --install"]),
        ("ios-arm64", &["builds only on macOS", "xcodebuild", "Xcode"]),
        ("android-arm64", &["aarch64-linux-android21-clang", "Android NDK", "ANDROID_NDK_HOME"]),
    ];
    for (platform, wanted) in cases {
        if *platform != "android-arm64" && std::env::consts::OS == "macos" {
            continue;
        }
        let err = env.fails(&["mobilenet-cpu", &format!("platform={platform}")]);
        assert!(err.contains("nothing was built"), "{err}");
        for w in *wanted {
            assert!(err.contains(w), "{platform}: no `{w}` in:\n{err}");
        }
        assert!(!env.out.path().join("mobilenet-cpu").exists(), "{platform}: work was done before the toolchain check");
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())).collect()
}

/// A project whose recipes and templates are the repository's, with its platform files plus
/// `arm64-silent`: linux-arm64 whose "emulator" is `true`, so the runner never prints.
fn project_with_silent_runner() -> tempfile::TempDir {
    let root = crate::common::project_linking(&["recipes", "templates"]);
    let toolchains = crate::common::copy_repo_folder(root.path(), "toolchains");
    let repo = repo();
    let arm = std::fs::read_to_string(repo.join("toolchains/linux-arm64.kdl")).unwrap();
    let silent = arm.replace("run \"qemu-aarch64\" \"-L\" \"/usr/aarch64-linux-gnu\"", "run \"true\"")
        + "\ntool \"true\" {\n    install {\n        apt \"coreutils\"\n    }\n}\n";
    std::fs::write(toolchains.join("arm64-silent.kdl"), silent).unwrap();
    root
}

#[cfg(unix)]
#[test]
fn mobilenet_cpu_verifies_under_qemu_aarch64_with_reproducible_checked_bundles() {
    if !(have("aarch64-linux-gnu-gcc") && have("qemu-aarch64")) {
        eprintln!("SKIPPED: needs aarch64-linux-gnu-gcc and qemu-aarch64 (apt-get install -y gcc-aarch64-linux-gnu qemu-user)");
        return;
    }
    let mut env = Env::new();
    let list = env.ok(&["list"]);
    assert!(list.lines().any(|l| l.starts_with("mobilenet-cpu") && l.contains("linux-arm64")), "{list}");

    // A small input keeps the emulated run short; the cross build is the real cost.
    let words = ["mobilenet-cpu", "platform=linux-arm64", "input-shape=1,3,96,96"];
    let verify: Vec<&str> = std::iter::once("verify").chain(words).collect();
    let verified = env.ok(&verify);
    let row = verified.lines().find(|l| l.starts_with("linux-arm64")).unwrap_or_else(|| panic!("{verified}"));
    assert!(row.contains("qemu-aarch64") && row.ends_with("pass"), "{verified}");
    eprintln!("{verified}");

    let dir = env.out.path().join("mobilenet-cpu/linux-arm64");
    let (bundle, tarball) = (dir.join("bundle"), dir.join("mobilenet-cpu-linux-arm64.tar.gz"));
    let names: Vec<String> = files(&bundle).into_keys().collect();
    assert_eq!(
        names,
        ["README.md", "SHA256SUMS", "image_classifier", "manifest.json", "model.pte", "run-qemu.sh", "size-report.txt", "verify-input.safetensors"]
    );
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["platform"]["rust_target"], "aarch64-unknown-linux-gnu");
    assert!(manifest["versions"]["aarch64-linux-gnu-gcc"].as_str().is_some_and(|v| v.contains("gcc")), "{manifest}");
    assert!(manifest["ops"].as_array().unwrap().iter().any(|o| o == "aten::convolution.out"));
    let runner = manifest["files"].as_array().unwrap().iter().find(|f| f["path"] == "image_classifier").unwrap();
    assert_eq!(runner["format"], "elf64-aarch64");
    env.ok(&["bundle", "--check", bundle.to_str().unwrap()]);
    env.ok(&["bundle", "--check", tarball.to_str().unwrap()]);

    // The bundle's own script runs the runner under QEMU.
    let o = Command::new(bundle.join("run-qemu.sh")).arg("--verify-input").arg(bundle.join("verify-input.safetensors")).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("RBUILD_OUTPUT index=0 dtype=float32 shape=1,1000 hex="), "{}", Env::text(&o));

    // A truncated file is named, exit 1.
    let damaged = tempfile::tempdir().unwrap();
    for (name, bytes) in files(&bundle) {
        let bytes = if name == "model.pte" { bytes[..bytes.len() - 100].to_vec() } else { bytes };
        std::fs::write(damaged.path().join(name), bytes).unwrap();
    }
    let err = env.fails(&["bundle", "--check", damaged.path().to_str().unwrap()]);
    assert!(err.contains("model.pte: sha256 differs from SHA256SUMS") && err.contains("model.pte:"), "{err}");

    // A second clean build (everything rbuild wrote removed; cargo's compiled dependencies
    // kept, to spare a second cold cross build) gives the same bytes.
    let (before, before_tar) = (files(&bundle), std::fs::read(&tarball).unwrap());
    for entry in std::fs::read_dir(env.out.path()).unwrap() {
        let p = entry.unwrap().path();
        if p.file_name().is_some_and(|n| n != ".target") {
            if p.is_dir() { std::fs::remove_dir_all(&p).unwrap() } else { std::fs::remove_file(&p).unwrap() }
        }
    }
    let rebuilt = env.ok(&words);
    assert!(rebuilt.contains("bundle:linux-arm64") && rebuilt.contains(" 0 cached"), "{rebuilt}");
    assert_eq!(files(&bundle), before, "the rebuilt bundle differs");
    assert!(std::fs::read(&tarball).unwrap() == before_tar, "the rebuilt tarball differs");

    // A runner that prints no RBUILD_OUTPUT fails verification, naming the platform.
    let root = project_with_silent_runner();
    env.root = Some(root.path().to_path_buf());
    let err = env.fails(&["verify", "mobilenet-cpu", "platform=arm64-silent", "input-shape=1,3,96,96"]);
    let row = err.lines().find(|l| l.starts_with("arm64-silent")).unwrap_or_else(|| panic!("{err}"));
    assert!(row.contains("FAIL: it printed no RBUILD_OUTPUT line"), "{err}");
    assert!(err.contains("verification failed on arm64-silent"), "{err}");
}
