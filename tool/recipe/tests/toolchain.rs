//! Probing and installing a platform's tools.

mod common;

use std::path::Path;

use common::TOOLCHAINS;
use rbuild_recipe::{load_platform, InstallError, InstallStep, Platform, RunSpec};

#[test]
fn host_check_finds_cargo_and_rustc() {
    let host = load_platform(Path::new(TOOLCHAINS).join("host.kdl")).unwrap();
    let statuses = host.check();
    let names: Vec<&str> = statuses.iter().map(|s| s.tool.as_str()).collect();
    assert_eq!(names, ["cargo", "rustc", "cc"]);
    // The tests run under cargo, so cargo and rustc are installed.
    for status in &statuses[..2] {
        let (path, version) = status.found.as_ref().unwrap_or_else(|| panic!("{} not found", status.tool));
        assert!(path.is_file(), "{path:?}");
        assert!(version.starts_with(&status.tool), "{version}");
    }
    assert_eq!(statuses[2].install_hint, "apt-get install -y build-essential");
}

#[test]
fn cross_platform_hints_are_exact_commands() {
    let arm = load_platform(Path::new(TOOLCHAINS).join("linux-arm64.kdl")).unwrap();
    let hints: Vec<(String, String)> = arm.check().into_iter().map(|s| (s.tool, s.install_hint)).collect();
    assert_eq!(
        hints,
        [
            ("aarch64-linux-gnu-gcc".to_string(), "apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross".to_string()),
            ("qemu-aarch64".to_string(), "apt-get install -y qemu-user".to_string()),
            ("rust-std for aarch64-unknown-linux-gnu".to_string(), "rustup target add aarch64-unknown-linux-gnu".to_string()),
        ]
    );
}

#[test]
fn run_command_wraps_the_binary_in_the_emulator() {
    let arm = load_platform(Path::new(TOOLCHAINS).join("linux-arm64.kdl")).unwrap();
    let cmd = arm.run.command(Path::new("out/runner")).unwrap();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    assert_eq!(cmd.get_program(), "qemu-aarch64");
    assert_eq!(args, ["-L", "/usr/aarch64-linux-gnu", "out/runner"]);
    assert_eq!(RunSpec::Native.command(Path::new("out/runner")).unwrap().get_program(), "out/runner");
}

#[test]
fn install_steps_display_as_commands() {
    let steps = [
        (InstallStep::Apt(vec!["a".into(), "b".into()]), "apt-get install -y a b"),
        (InstallStep::Pip(vec!["ziglang".into()]), "pip install ziglang"),
        (InstallStep::RustupTarget(vec!["thumbv8m.main-none-eabihf".into()]), "rustup target add thumbv8m.main-none-eabihf"),
        (InstallStep::Cargo(vec!["flip-link".into()]), "cargo install flip-link"),
        (InstallStep::Manual("ask IT".into()), "ask IT"),
    ];
    for (step, shown) in steps {
        assert_eq!(step.to_string(), shown);
    }
}

#[test]
fn install_with_nothing_missing_runs_nothing() {
    let text = "target \"host\"\nrun \"native\"\ntool \"cargo\" { install { apt \"never-run\" } }\n";
    let platform = Platform::from_source("present.kdl", text).unwrap();
    assert_eq!(platform.install(), Ok(Vec::new()));
}

#[test]
fn a_tool_without_automatic_steps_is_reported_not_run() {
    let text = r#"
target "host"
run "native"
tool "rbuild-test-no-such-tool" {
    install {
        manual "build it from source"
    }
}
tool "rbuild-test-undeclared-install"
"#;
    let platform = Platform::from_source("manual.kdl", text).unwrap();
    let statuses = platform.check();
    assert!(statuses.iter().all(|s| s.found.is_none()));
    assert_eq!(statuses[1].install_hint, "no install steps are declared for `rbuild-test-undeclared-install` in manual.kdl");
    match platform.install() {
        Err(InstallError::Manual { ran, steps }) => {
            assert!(ran.is_empty());
            assert_eq!(steps.len(), 2);
            assert_eq!(steps[0], ("rbuild-test-no-such-tool".to_string(), "build it from source".to_string()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_broken_version_probe_is_reported_not_fatal() {
    // `true` prints nothing; `sh -c 'exit 3'` prints nothing either and fails.
    let text = r#"
target "host"
run "native"
tool "true" { version "--version" }
tool "sh" { version "-c" "echo 'sh 9.9' >&2; exit 3" }
"#;
    let platform = Platform::from_source("probe.kdl", text).unwrap();
    let statuses = platform.check();
    if let Some((_, version)) = &statuses[0].found {
        assert!(!version.is_empty());
    }
    if let Some((_, version)) = &statuses[1].found {
        assert_eq!(version, "sh 9.9", "stderr is read when stdout is empty");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn apple_platforms_on_linux_say_to_build_on_a_mac_first() {
    for name in ["macos-arm64", "ios-arm64"] {
        let p = load_platform(Path::new(TOOLCHAINS).join(format!("{name}.kdl"))).unwrap();
        let statuses = p.check();
        let first = &statuses[0];
        assert_eq!(first.tool, "macOS build machine");
        assert!(first.found.is_none());
        assert!(first.install_hint.contains(&format!("{name} builds only on macOS")), "{}", first.install_hint);
        let xcrun = statuses.iter().find(|s| s.tool == "xcrun").unwrap();
        assert!(xcrun.install_hint.contains("xcode-select"), "{}", xcrun.install_hint);
        // Nothing automatic can fix it: install says what to do by hand.
        match p.install() {
            Err(InstallError::Manual { steps, .. }) => assert!(steps.iter().any(|(t, _)| t == "macOS build machine"), "{steps:?}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn android_needs_the_ndk_linker_and_does_not_run_here() {
    let p = load_platform(Path::new(TOOLCHAINS).join("android-arm64.kdl")).unwrap();
    let ndk = p.check().into_iter().find(|s| s.tool == "aarch64-linux-android21-clang").unwrap();
    assert!(ndk.install_hint.contains("Android NDK") && ndk.install_hint.contains("ANDROID_NDK_HOME"), "{}", ndk.install_hint);
    assert!(p.run.command(Path::new("runner")).is_none());
    assert!(p.run.describe().starts_with("not here: on an Android device"));
}

#[test]
fn host_os_and_run_none_are_checked() {
    let e = Platform::from_source("p.kdl", "host-os \"macoss\"\ntarget \"host\"\nrun \"none\" \"a\" \"b\"\n").unwrap_err();
    let text = rbuild_recipe::render(&e);
    assert!(text.contains("unknown operating system `macoss`") && text.contains("did you mean `macos`"), "{text}");
    assert!(text.contains("`run \"none\"` takes one explanation"), "{text}");
}

#[test]
fn the_cross_gcc_requires_its_c_library() {
    let arm = load_platform(Path::new(TOOLCHAINS).join("linux-arm64.kdl")).unwrap();
    let gcc = arm.tools.iter().find(|t| t.name == "aarch64-linux-gnu-gcc").unwrap();
    assert_eq!(gcc.requires, [Path::new("/usr/aarch64-linux-gnu/lib/crti.o")]);
}

#[test]
fn a_tool_missing_a_required_file_counts_as_missing() {
    // `sh` is on PATH everywhere; the file it "requires" is absent, the other present.
    let present = tempfile::NamedTempFile::new().unwrap();
    let text = format!(
        r#"
target "host"
run "native"
tool "sh" {{
    requires "/nonexistent/rbuild-test/crti.o" "{}"
    install {{
        apt "libc6-dev-arm64-cross"
    }}
}}
tool "true" {{
    requires "{}"
}}
"#,
        present.path().display(),
        present.path().display()
    );
    let platform = Platform::from_source("requires.kdl", text).unwrap();
    let statuses = platform.check();
    assert!(statuses[0].found.is_none(), "{:?}", statuses[0]);
    assert_eq!(statuses[0].missing_files, [Path::new("/nonexistent/rbuild-test/crti.o")]);
    assert_eq!(statuses[0].why_missing().unwrap(), "incomplete: no /nonexistent/rbuild-test/crti.o");
    assert_eq!(statuses[0].install_hint, "apt-get install -y libc6-dev-arm64-cross");
    assert!(statuses[1].found.is_some() && statuses[1].missing_files.is_empty(), "{:?}", statuses[1]);
}

#[test]
fn requires_takes_absolute_paths() {
    let text = "target \"host\"\nrun \"native\"\ntool \"sh\" { requires \"lib/crti.o\"; }\n";
    let e = Platform::from_source("p.kdl", text).unwrap_err();
    let text = rbuild_recipe::render(&e);
    assert!(text.contains("`requires` path `lib/crti.o` is not absolute"), "{text}");
}

#[test]
fn a_cuda_platform_needs_the_gpu_to_run_not_to_build() {
    let cuda = load_platform(Path::new(TOOLCHAINS).join("linux-cuda.kdl")).unwrap();
    assert_eq!(cuda.gpu, Some(rbuild_recipe::PlatformGpu::Cuda));
    // Building needs a Linux machine and the host's tools; the driver is not one of them.
    let names: Vec<String> = cuda.check().into_iter().map(|s| s.tool).collect();
    assert_eq!(names, ["Linux build machine", "cargo", "rustc", "cc"]);
    assert_eq!(load_platform(Path::new(TOOLCHAINS).join("host.kdl")).unwrap().gpu, None);
    let text = "target \"host\"\nrun \"native\"\ngpu \"opencl\"\n";
    let report = Platform::from_source("bad-gpu.kdl", text).unwrap_err();
    let shown = format!("{report:?}");
    assert!(shown.contains("unknown GPU runtime `opencl`") && shown.contains("`cuda`"), "{shown}");
}
