//! `rbuild mobilenet-cpu` end to end: build, run the runner, no-op rebuild, plan, real
//! weights against the PyTorch reference, interrupted builds, and a missing toolchain.
//! Builds land in a temporary out/ (RBUILD_OUT); runners compile for real (release).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::testdata;

struct Env {
    out: tempfile::TempDir,
}

impl Env {
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rbuild"));
        c.env("RBUILD_OUT", self.out.path()).env_remove("RBUILD_TEST_HOLD");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "rbuild {args:?} failed:\n{text}");
        text
    }

    fn dir(&self) -> PathBuf {
        self.out.path().join("mobilenet-cpu/host")
    }

    /// Runs rbuild on the project at `root` (same out folder); (exit code, stdout + stderr).
    fn run_in(&self, root: &Path, args: &[&str]) -> (Option<i32>, String) {
        let o = self.cmd().env("RBUILD_ROOT", root).args(args).output().unwrap();
        (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    }
}

/// A copy of the project whose `linux-arm64` cross gcc is looked up under a name no machine
/// has, as on a machine without the cross tools; the host platform is untouched.
fn project_without_cross_gcc() -> tempfile::TempDir {
    let root = common::project_linking(&["recipes", "templates"]);
    let toolchains = common::copy_repo_folder(root.path(), "toolchains");
    let arm = std::fs::read_to_string(common::repo().join("toolchains/linux-arm64.kdl")).unwrap();
    let gcc = "tool \"aarch64-linux-gnu-gcc\" {";
    assert!(arm.contains(gcc), "{arm}");
    let missing = arm.replace(gcc, &format!("{gcc}\n    command \"rbuild-test-no-such-gcc\""));
    std::fs::write(toolchains.join("linux-arm64.kdl"), missing).unwrap();
    root
}

fn classify(runner: &Path, model: &Path, image: &Path) -> Vec<(usize, f64)> {
    let o = Command::new(runner).arg("--model").arg(model).arg("--image").arg(image).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["top"].as_array().unwrap().iter().map(|r| (r["index"].as_u64().unwrap() as usize, r["probability"].as_f64().unwrap())).collect()
}

fn softmax_top5(logits: &[f32]) -> Vec<(usize, f64)> {
    let max = logits.iter().fold(f32::MIN, |a, &b| a.max(b)) as f64;
    let exps: Vec<f64> = logits.iter().map(|&x| (x as f64 - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    idx.into_iter().take(5).map(|i| (i, exps[i] / sum)).collect()
}

/// Starts a build, waits until its stderr shows `marker` (optionally holding it inside step
/// `hold`), and interrupts it there with `signal` (INT as Ctrl-C sends, or KILL).
fn interrupt_at(env: &Env, hold: Option<&str>, marker: &str, signal: &str, args: &[&str]) {
    let mut cmd = env.cmd();
    if let Some(step) = hold {
        cmd.env("RBUILD_TEST_HOLD", step);
    }
    let mut child = cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Wait for the hold message, then interrupt.
    let mut err = child.stderr.take().unwrap();
    let mut seen = String::new();
    let t = Instant::now();
    while !seen.contains(marker) && t.elapsed() < Duration::from_secs(600) {
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(&mut err, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains(marker), "build never showed {marker:?}: {seen}");
    // A positive pid only: this signals the one rbuild process.
    let sent = Command::new("kill").args(["-s", signal, "--", &child.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert!(!status.success(), "an interrupted build must not succeed");
}

#[test]
fn mobilenet_cpu_builds_runs_caches_and_survives_interruption() {
    let env = Env { out: tempfile::tempdir().unwrap() };

    // Plan first: runs nothing, writes nothing but (at most) the hash memo.
    let plan = env.ok(&["plan", "mobilenet-cpu", "platform=host"]);
    assert!(plan.contains("would run") && !env.dir().exists(), "{plan}");

    // Interrupted during export, then rebuilt: a correct program, no stale cache entry.
    interrupt_at(&env, Some("export"), "holding in step export", "INT", &["mobilenet-cpu", "platform=host"]);
    assert!(!env.dir().join("model.pte").exists());
    // The harsher case: killed outright (no handler runs) right after export finished.
    interrupt_at(&env, Some("select"), "holding in step select", "KILL", &["mobilenet-cpu", "platform=host"]);

    // The first command of the README: random weights, announced.
    let first = env.ok(&["mobilenet-cpu", "platform=host"]);
    assert!(first.contains("random weights"), "{first}");
    let (runner, model) = (env.dir().join("image_classifier"), env.dir().join("model.pte"));
    let img = testdata().join("models/images/img2_shapes_w300_h300.png");
    assert_eq!(classify(&runner, &model, &img).len(), 5);

    // The runner's kernels are exactly the program's operators.
    let kernels: serde_json::Value = serde_json::from_slice(&std::fs::read(env.out.path().join("mobilenet-cpu/program/kernels.json")).unwrap()).unwrap();
    let listed = Command::new(&runner).arg("--list-kernels").output().unwrap();
    let mut listed: Vec<String> = String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect();
    listed.sort();
    let ops: Vec<String> = kernels["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_string()).collect();
    assert_eq!(listed, ops);
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(env.dir().join("manifest.json")).unwrap()).unwrap();
    let (small, all) = (manifest["runner_stripped_bytes"].as_u64().unwrap(), manifest["runner_all_kernels_stripped_bytes"].as_u64().unwrap());
    eprintln!("runner {small} bytes stripped, with all kernels {all} bytes");
    assert!(small < all);

    // Nothing changed: nothing runs.
    let again = env.ok(&["mobilenet-cpu", "platform=host"]);
    assert!(again.contains("0 ran, 7 cached"), "{again}");

    // Without the cross tools the recipe's other platform is skipped, named with what it
    // lacks and how to install it; the host is built (here: cached) and the exit is 0.
    let no_cross = project_without_cross_gcc();
    let (code, text) = env.run_in(no_cross.path(), &["mobilenet-cpu"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("skipped platform linux-arm64: missing aarch64-linux-gnu-gcc"), "{text}");
    assert!(text.contains("apt-get install -y gcc-aarch64-linux-gnu") && text.contains("rbuild toolchain install linux-arm64"), "{text}");
    assert!(text.contains("runner:host") && env.dir().join("image_classifier").is_file(), "{text}");
    assert!(!env.out.path().join("mobilenet-cpu/linux-arm64").exists(), "{text}");
    // verify reports the skipped platform as such and passes on the host.
    let (code, text) = env.run_in(no_cross.path(), &["verify", "mobilenet-cpu"]);
    assert_eq!(code, Some(0), "{text}");
    let row = text.lines().find(|l| l.starts_with("linux-arm64")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("skipped: not built: missing aarch64-linux-gnu-gcc; rbuild toolchain install linux-arm64"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("host") && l.contains("pass")), "{text}");
    // --strict (CI) turns the skip into a failure.
    let (code, text) = env.run_in(no_cross.path(), &["verify", "--strict", "mobilenet-cpu"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("missing tools (nothing was built") && text.contains("aarch64-linux-gnu-gcc"), "{text}");

    // verify: the native runner on the recipe's verify input matches the in-process reference
    // (the build it starts with is all cached); the bundle's checksums hold.
    let verified = env.ok(&["verify", "mobilenet-cpu", "platform=host"]);
    assert!(verified.contains("0 ran, 7 cached") && verified.contains("native") && verified.contains("pass"), "{verified}");
    let bundle = env.dir().join("bundle");
    let checked = env.ok(&["bundle", "--check", bundle.to_str().unwrap()]);
    assert!(checked.contains("ok ("), "{checked}");

    // Real weights: the top-5 matches PyTorch's logits for this image.
    let weights = testdata().join("models/mobilenet_v2/model.safetensors");
    let w = format!("weights={}", weights.display());
    let real = env.ok(&["mobilenet-cpu", "platform=host", &w]);
    assert!(!real.contains("random weights"), "{real}");
    let io = std::fs::read(testdata().join("models/mobilenet_v2/model.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io).unwrap();
    let logits: Vec<f32> = io.tensor("output.0").unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let want = softmax_top5(&logits);
    let got = classify(&runner, &model, &img);
    for ((gi, gp), (wi, wp)) in got.iter().zip(&want) {
        assert_eq!(gi, wi, "top-5 {got:?} vs {want:?}");
        assert!((gp - wp).abs() <= 1e-4, "top-5 {got:?} vs {want:?}");
    }

    // Every shared image: the top-5 matches ExecuTorch 1.3.1 running ExecuTorch's own MobileNetV2
    // program on the reference preprocessing (PyTorch logits exist for img2 only).
    if let Some(python) = common::oracle_python() {
        for entry in std::fs::read_dir(testdata().join("models/images")).unwrap() {
            let png = entry.unwrap().path();
            if png.extension().is_none_or(|x| x != "png") {
                continue;
            }
            let pre = png.with_extension("preprocessed.safetensors");
            let et_out = env.out.path().join("et_logits.safetensors");
            let run = Command::new(&python)
                .arg(common::repo().join("tool/python/et_run.py"))
                .arg(testdata().join("models/mobilenet_v2/model.pte"))
                .arg(&pre)
                .arg("pil.normalized")
                .arg(&et_out)
                .output()
                .unwrap();
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
            let bytes = std::fs::read(&et_out).unwrap();
            let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
            let logits: Vec<f32> = st.tensor("output.0").unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            let want = softmax_top5(&logits);
            let got = classify(&runner, &model, &png);
            for ((gi, gp), (wi, wp)) in got.iter().zip(&want) {
                assert_eq!(gi, wi, "{}: top-5 {got:?} vs ExecuTorch {want:?}", png.display());
                assert!((gp - wp).abs() <= 1e-4, "{}: top-5 {got:?} vs ExecuTorch {want:?}", png.display());
            }
        }
    }

    // Interrupted in the runner step, then rebuilt.
    {
        // cargo's own output shows it compiling the runner: kill rbuild right then.
        interrupt_at(&env, None, "Compiling rbuild-runner", "INT", &["mobilenet-cpu", "platform=host", &w, "embed-program=true"]);
        let rebuilt = env.ok(&["mobilenet-cpu", "platform=host", &w, "embed-program=true"]);
        assert!(rebuilt.contains("runner:host") && rebuilt.contains("ran"), "{rebuilt}");
        let o = Command::new(&runner).arg("--image").arg(&img).arg("--json").output().unwrap();
        assert!(o.status.success(), "embedded-program runner: {}", String::from_utf8_lossy(&o.stderr));
    }

    // Here, where the runtime and kernels are compiled already in the shared target folder.
    generic_runner_recipe_builds_verifies_and_runs(&env);
}

/// A recipe without a `runner` gets the generic one (`templates/tensor_io`): selectively built,
/// bundled with the verify input, verified, and its runner reproduces `rbuild run`.
fn generic_runner_recipe_builds_verifies_and_runs(env: &Env) {
    let root = common::project_linking(&["templates", "toolchains"]);
    std::fs::create_dir(root.path().join("recipes")).unwrap();
    let recipe = "description \"no runner node: the generic runner\"\nmodel \"mobilenet_v2\" { weights \"random:3\"; input-shape 1 3 32 32 }\nbackend \"cpu\"\nplatforms \"host\"\nverify { seed 2 }\n";
    std::fs::write(root.path().join("recipes/generic-cpu.kdl"), recipe).unwrap();
    let (code, text) = env.run_in(root.path(), &["generic-cpu"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("generate and build pte_runner for host (selected kernels)"), "{text}");
    let dir = env.out.path().join("generic-cpu/host");
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["runner"], "tensor-io");

    // The bundle's runner on the bundle's verify input, as its README says to run it.
    let bundle = dir.join("bundle");
    let readme = std::fs::read_to_string(bundle.join("README.md")).unwrap();
    assert!(readme.contains("--inputs verify-input.safetensors --output outputs.safetensors"), "{readme}");
    let (ours, reference) = (env.out.path().join("generic-ours.safetensors"), env.out.path().join("generic-ref.safetensors"));
    let o = Command::new(bundle.join("pte_runner"))
        .arg("--model")
        .arg(bundle.join("model.pte"))
        .arg("--inputs")
        .arg(bundle.join("verify-input.safetensors"))
        .arg("--output")
        .arg(&ours)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let program = env.out.path().join("generic-cpu/program");
    env.ok(&["run", program.join("model.pte").to_str().unwrap(), "--inputs", program.join("verify-input.safetensors").to_str().unwrap(), "--output", reference.to_str().unwrap()]);
    let floats = |p: &Path| -> Vec<f32> {
        let bytes = std::fs::read(p).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        st.tensor("output.0").unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    };
    let (got, want) = (floats(&ours), floats(&reference));
    assert_eq!(got.len(), 1000);
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 + 1e-5 * b.abs()), "pte_runner and rbuild run differ");

    // rbuild verify drives it through the verify protocol.
    let (code, text) = env.run_in(root.path(), &["verify", "generic-cpu"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.lines().any(|l| l.starts_with("host") && l.contains("pass")), "{text}");
}

#[test]
fn a_platform_with_missing_tools_fails_before_any_work_when_asked_for() {
    let env = Env { out: tempfile::tempdir().unwrap() };
    let no_cross = project_without_cross_gcc();
    // By name (`platform=…`) or with --strict, a platform without its tools fails the build
    // at once, saying what to install.
    for args in [&["mobilenet-cpu", "platform=linux-arm64"][..], &["mobilenet-cpu", "--strict"], &["plan", "mobilenet-cpu", "--strict"]] {
        let (code, err) = env.run_in(no_cross.path(), args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("missing tools (nothing was built"), "{args:?}: {err}");
        assert!(err.contains("`aarch64-linux-gnu-gcc` not found") && err.contains("apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross"), "{args:?}: {err}");
        assert!(err.contains("rbuild toolchain install linux-arm64"), "{args:?}: {err}");
        assert!(!env.out.path().join("mobilenet-cpu").exists(), "{args:?}: work was done before the toolchain check");
    }
    // A plan without --strict leaves the platform out and says so.
    let (code, plan) = env.run_in(no_cross.path(), &["plan", "mobilenet-cpu"]);
    assert_eq!(code, Some(0), "{plan}");
    assert!(plan.contains("skipped platform linux-arm64") && plan.contains("runner:host") && !plan.contains("runner:linux-arm64"), "{plan}");
    // An option the build does not know is an error, not a recipe setting.
    let (code, err) = env.run_in(no_cross.path(), &["mobilenet-cpu", "--strcit"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("unknown option `--strcit`"), "{err}");
}

#[test]
fn recipe_errors_are_diagnostics() {
    let env = Env { out: tempfile::tempdir().unwrap() };
    let o = env.run(&["mobilenet-cpu", "wieghts=x"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("weights") && err.contains("command line"), "{err}");
    let o = env.run(&["mobilenet-cuda"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("mobilenet-cpu"), "suggests the known recipe: {err}");
}

#[test]
fn int8_recipe_keys_the_export_by_the_calibration_images() {
    let env = Env { out: tempfile::tempdir().unwrap() };
    let images = testdata().join("models/images");
    let calibration = format!("calibration={}", images.display());
    let plan = env.ok(&["plan", "mobilenet-cpu", "quantize=int8", &calibration]);
    assert!(plan.contains("quantize = Int8"), "{plan}");
    assert!(plan.contains("img2_shapes_w300_h300.png sha256:"), "each calibration image keys the export:\n{plan}");
    // A calibration folder with no images fails the export step, naming the folder.
    let empty = tempfile::tempdir().unwrap();
    let o = env.run(&["mobilenet-cpu", "quantize=int8", &format!("calibration={}", empty.path().display())]);
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && text.contains("no PNG or JPEG images"), "{text}");
    assert!(!env.dir().join("model.pte").exists());
}
