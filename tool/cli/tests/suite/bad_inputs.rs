//! Malformed programs and tensor files give a clear error naming the file, a non-zero exit,
//! and never a panic (../shared/testdata/bad, see its README).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bad_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/bad")
}

fn rbuild(args: &[&Path]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rbuild"));
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn assert_clean_failure(out: &Output, file: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{} was accepted", file.display());
    assert_eq!(out.status.code(), Some(1), "{}: {err}", file.display());
    assert!(!err.contains("panicked"), "{}: panic: {err}", file.display());
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name), "{}: error does not name the file: {err}", file.display());
}

#[test]
fn malformed_programs_fail_cleanly() {
    let dir = bad_dir();
    let io = dir.join("base.io.safetensors");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".pte") || name == "base.pte" {
            continue;
        }
        // Both reference runtimes accept a wrong extended-header magic; either answer is allowed
        // as long as it is not a crash.
        let either = name == "bad_ext_header_magic.pte";
        let run = rbuild(&[Path::new("run"), &p, Path::new("--inputs"), &io]);
        let inspect = rbuild(&[Path::new("inspect"), &p]);
        for out in [&run, &inspect] {
            if either {
                assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
            } else {
                assert_clean_failure(out, &p);
            }
        }
        n += 1;
    }
    assert!(n >= 16, "only {n} malformed programs found");
}

#[test]
fn malformed_safetensors_fail_cleanly() {
    let dir = bad_dir();
    let base = dir.join("base.pte");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("st_") {
            continue;
        }
        let out = rbuild(&[Path::new("run"), &base, Path::new("--inputs"), &p]);
        assert_clean_failure(&out, &p);
        n += 1;
    }
    assert!(n >= 7);
    // The valid control file parses, but has no `input.0`: an error naming it and the method.
    let ok = dir.join("valid_small.safetensors");
    let out = rbuild(&[Path::new("run"), &base, Path::new("--inputs"), &ok]);
    assert_clean_failure(&out, &ok);
}

#[test]
fn wrong_input_shape_and_dtype_are_named() {
    let dir = bad_dir();
    let tmp = tempfile::tempdir().unwrap();
    // base.pte takes float32 [2, 8]; give it float32 [2, 7].
    let st = tmp.path().join("wrong.safetensors");
    let data = vec![0u8; 2 * 7 * 4];
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 7], &data).unwrap();
    std::fs::write(&st, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
    let out = rbuild(&[Path::new("run"), &dir.join("base.pte"), Path::new("--inputs"), &st]);
    assert_clean_failure(&out, &st);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected shape [2, 8]"));
}

#[test]
fn missing_program_file_is_named() {
    let p = Path::new("/nonexistent/model.pte");
    let out = rbuild(&[Path::new("inspect"), p]);
    assert_clean_failure(&out, p);
}

/// `rbuild inspect model.pte | head`: a reader that goes away ends rbuild quietly (SIGPIPE),
/// never with a panic about a failed write.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let pte = common::testdata().join("models/mobilenet_v2/model.pte");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .args(["inspect".as_ref(), pte.as_os_str()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before rbuild has parsed the program and written anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
