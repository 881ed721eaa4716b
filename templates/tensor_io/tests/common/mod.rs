//! Shared test helpers: the testdata cases (`NAME.pte` + `NAME.json` + `NAME.io.safetensors`),
//! the case tolerance, and running a runner binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rbuild_runner_support::tensors::{self, HostTensor};

/// `../shared/testdata` beside the checkout.
pub fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata")
}

/// One testdata case with a program.
pub struct Case {
    pub pte: PathBuf,
    pub io: PathBuf,
    pub meta: serde_json::Value,
}

impl Case {
    /// The path below testdata, for messages.
    pub fn label(&self) -> String {
        self.pte.strip_prefix(testdata()).unwrap_or(&self.pte).display().to_string()
    }

    /// The backend ids of its delegate blobs (empty for programs rbuild's kernels run).
    pub fn delegates(&self) -> Vec<String> {
        self.meta["delegates"].as_array().into_iter().flatten().filter_map(|d| d.as_str().map(String::from)).collect()
    }

    pub fn expected(&self) -> BTreeMap<String, HostTensor> {
        tensors::read_file(&self.io).unwrap()
    }
}

/// Every case with a program below `dir`, sorted: new cases are picked up without code changes.
pub fn cases(dir: &Path) -> Vec<Case> {
    fn walk(dir: &Path, out: &mut Vec<Case>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                walk(&p, out);
                continue;
            }
            let Some(stem) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".pte")) else { continue };
            let (json, io) = (p.with_file_name(format!("{stem}.json")), p.with_file_name(format!("{stem}.io.safetensors")));
            let Ok(text) = std::fs::read_to_string(&json) else { continue };
            if !io.is_file() {
                continue;
            }
            // Python's JSON may hold bare Infinity/NaN (in fields these tests do not read).
            let text = text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
            out.push(Case { pte: p, io, meta: serde_json::from_str(&text).expect("case json") });
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

/// How each `output.N` of `want` differs from `got` under the case tolerance
/// (`|got − want| ≤ atol + rtol·|want|`, NaN equal to NaN; integers and bools exactly).
pub fn mismatches(got: &BTreeMap<String, HostTensor>, want: &BTreeMap<String, HostTensor>, meta: &serde_json::Value) -> Vec<String> {
    let atol = meta["atol"].as_f64().unwrap_or(1e-5);
    let rtol = meta["rtol"].as_f64().unwrap_or(1e-5);
    let mut problems = Vec::new();
    for (name, w) in want.iter().filter(|(n, _)| n.starts_with("output.")) {
        let Some(g) = got.get(name) else {
            problems.push(format!("{name} missing"));
            continue;
        };
        if (g.dtype, &g.shape) != (w.dtype, &w.shape) {
            problems.push(format!("{name}: {} {:?}, want {} {:?}", g.dtype, g.shape, w.dtype, w.shape));
            continue;
        }
        let (gv, wv) = (g.values_f64().unwrap(), w.values_f64().unwrap());
        let (atol, rtol) = if w.dtype.is_floating() { (atol, rtol) } else { (0.0, 0.0) };
        let outside = gv.iter().zip(&wv).filter(|(a, b)| !(a == b || (a.is_nan() && b.is_nan()) || (*a - *b).abs() <= atol + rtol * b.abs())).count();
        if outside > 0 {
            problems.push(format!("{name}: {outside} of {} elements outside atol {atol} rtol {rtol}", wv.len()));
        }
    }
    problems
}

pub fn run(bin: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(bin).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit status 1, no panic, and every one of `names` in the message.
pub fn assert_clean_failure(o: &Output, names: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "expected a failure; stdout: {} stderr: {err}", stdout(o));
    assert!(err.starts_with("error: ") && !err.contains("panicked"), "{err}");
    for n in names {
        assert!(err.contains(n), "the error should name {n:?}: {err}");
    }
}
