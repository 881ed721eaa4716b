//! `rbuild ops --json` against the operator sets rbuild promises to cover: every Core ATen
//! operator (`shared/spec/core_aten_schemas.txt`, tag `core`) has an importer mapping or a
//! named exception with its reason, and every entry of ExecuTorch's portable
//! `functions.yaml` (listed by `testdata/ops_portable/index.json`) has a runtime kernel. A row
//! that disappears fails here.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::{repo, testdata};

fn coverage() -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rbuild")).args(["ops", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("rbuild ops --json prints JSON")
}

fn strings(v: &serde_json::Value, key: Option<&str>) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| match key {
            Some(k) => row[k].as_str(),
            None => row.as_str(),
        })
        .map(String::from)
        .collect()
}

/// `aten::op.overload` of every schema the spec file tags `core`.
fn core_aten_ops() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("../shared/spec/core_aten_schemas.txt")).expect("shared/spec/core_aten_schemas.txt");
    text.lines()
        .filter(|l| l.starts_with("aten::"))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let op = words.next()?;
            (words.next() == Some("core")).then(|| op.to_string())
        })
        .collect()
}

/// The functions.yaml entries: the cases of `ops_portable/`, the operators whose cases live in
/// `ops/`, and the entries no program can contain.
fn portable_entries() -> Vec<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(testdata().join("ops_portable/index.json")).expect("ops_portable/index.json")).unwrap();
    let mut ops: Vec<String> = index["cases"].as_object().expect("cases").keys().cloned().collect();
    ops.extend(strings(&index["preexisting_op_dirs"], None));
    ops.extend(index["skipped"].as_object().expect("skipped").keys().cloned());
    assert_eq!(ops.len(), index["functions_yaml_entries"].as_u64().unwrap() as usize, "index.json lists every functions.yaml entry once");
    ops
}

#[test]
fn every_core_aten_op_is_imported_or_named_as_an_exception() {
    let table = coverage();
    let mut mapped = strings(&table["importer"]["targets"], None);
    mapped.extend(strings(&table["importer"]["out_variant_calls"], None));
    let exceptions = strings(&table["importer"]["not_mapped"], Some("op"));
    for row in table["importer"]["not_mapped"].as_array().unwrap() {
        assert!(row["reason"].as_str().is_some_and(|r| r.len() > 10), "exception without a reason: {row}");
    }
    let core = core_aten_ops();
    assert!(core.len() >= 180, "core_aten_schemas.txt not found or changed: {} core schemas", core.len());
    let missing: Vec<&String> = core.iter().filter(|op| !mapped.contains(*op) && !exceptions.contains(*op)).collect();
    let names: BTreeSet<&str> = core.iter().map(|op| op.split('.').next().unwrap()).collect();
    eprintln!(
        "importer: {} of {} Core ATen schemas ({} operators) mapped, {} named exceptions",
        core.iter().filter(|op| mapped.contains(*op)).count(),
        core.len(),
        names.len(),
        exceptions.len()
    );
    assert!(missing.is_empty(), "Core ATen ops with no importer mapping and no named exception: {missing:?}");
}

#[test]
fn every_portable_entry_has_a_runtime_kernel() {
    let table = coverage();
    let kernels = strings(&table["runtime"]["kernels"], Some("op"));
    let entries = portable_entries();
    let missing: Vec<&String> = entries.iter().filter(|op| !kernels.contains(*op)).collect();
    eprintln!("runtime: {} of {} functions.yaml entries have a kernel; {} kernels in all", entries.len() - missing.len(), entries.len(), kernels.len());
    assert!(missing.is_empty(), "functions.yaml entries without a runtime kernel: {missing:?}");
}

#[test]
fn delegate_rows_and_filter() {
    let table = coverage();
    for d in ["xnnpack", "gpu", "ethos-u"] {
        let rows = table["delegates"][d]["export"].as_array().map_or(0, |r| r.len());
        assert!(rows > 0, "{d}: no ops listed");
    }
    assert!(table["delegates"]["xnnpack"]["runtime_nodes"].as_array().is_some_and(|r| !r.is_empty()));
    // A filter keeps only matching rows, in every section.
    let out = Command::new(env!("CARGO_BIN_EXE_rbuild")).args(["ops", "topk", "--json"]).output().unwrap();
    let filtered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops = strings(&filtered["runtime"]["kernels"], Some("op"));
    assert!(!ops.is_empty() && ops.iter().all(|o| o.contains("topk")), "{ops:?}");
    let text = Command::new(env!("CARGO_BIN_EXE_rbuild")).args(["ops", "aten::add"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("aten::add.out") && text.contains("aten::add.Tensor"), "{text}");
}
