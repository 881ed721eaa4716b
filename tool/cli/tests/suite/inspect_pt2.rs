//! `rbuild inspect MODEL.pt2` on every archive in `../shared/testdata/pt2`: its report agrees
//! with the case json (node targets, user inputs and outputs, dynamic bounds); damaged
//! archives fail naming the file and member.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn pt2_dir() -> PathBuf {
    common::testdata().join("pt2")
}

fn rbuild(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rbuild")).args(args).output().unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Case jsons naming an archive (`NAME.json` and per-length variants), sorted.
fn cases() -> Vec<Value> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(pt2_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths.iter().filter(|p| p.extension().is_some_and(|x| x == "json")).map(|p| read_json(p)).filter(|j| j.get("archive").is_some()).collect()
}

fn inspect_json(archive: &Path) -> Value {
    let out = rbuild(&["inspect", "--json", archive.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check_tensors(archive: &str, reported: &Value, expected: &Value) {
    let (reported, expected) = (reported.as_array().unwrap(), expected.as_array().unwrap());
    assert_eq!(reported.len(), expected.len(), "{archive}");
    for (r, e) in reported.iter().zip(expected) {
        assert_eq!(r["dtype"], e["dtype"], "{archive}: {}", r["name"]);
        let dims = r["dims"].as_array().unwrap();
        let shape = e["shape"].as_array().unwrap();
        assert_eq!(dims.len(), shape.len(), "{archive}: {}", r["name"]);
        for (d, s) in dims.iter().zip(shape) {
            let size = s.as_u64().unwrap();
            if d.is_u64() {
                assert_eq!(d.as_u64(), Some(size), "{archive}: {}", r["name"]);
            } else if d.get("symbol").is_some() {
                let within = d["min"].as_u64().unwrap() <= size && d["max"].as_u64().is_none_or(|m| size <= m);
                assert!(within, "{archive}: {size} outside {d}");
            }
        }
    }
}

#[test]
fn inspect_reports_every_archive_as_its_case_describes_it() {
    let cases = cases();
    assert!(cases.len() >= 3, "no pt2 cases in {}", pt2_dir().display());
    for case in &cases {
        let archive = case["archive"].as_str().unwrap();
        let report = inspect_json(&pt2_dir().join(archive));
        assert_eq!(report["format"], "pt2");
        let model = &report["models"][0];
        let targets: BTreeSet<&str> =
            model["targets"].as_array().unwrap().iter().map(|t| t["op"].as_str().unwrap()).collect();
        let ops: BTreeSet<&str> = case["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        assert_eq!(targets, ops, "{archive}");
        let calls: u64 = model["targets"].as_array().unwrap().iter().map(|t| t["calls"].as_u64().unwrap()).sum();
        assert_eq!(Some(calls), model["nodes"].as_u64(), "{archive}");
        check_tensors(archive, &model["inputs"], &case["inputs"]);
        check_tensors(archive, &model["outputs"], &case["outputs"]);
        if let Some(ranges) = case.get("range_constraints").and_then(Value::as_object) {
            for input in model["inputs"].as_array().unwrap() {
                for dim in input["dims"].as_array().unwrap().iter().filter(|d| d.get("symbol").is_some()) {
                    let range = &ranges[dim["symbol"].as_str().unwrap()];
                    assert_eq!((&dim["min"], &dim["max"]), (&range["min"], &range["max"]), "{archive}");
                }
            }
        }
    }
}

#[test]
fn inspect_text_shows_dynamic_bounds_and_weights() {
    let case = cases().into_iter().find(|c| c["range_constraints"].as_object().is_some_and(|r| !r.is_empty()));
    let case = case.expect("a dynamic-shape case");
    let archive = pt2_dir().join(case["archive"].as_str().unwrap());
    let out = rbuild(&["inspect", archive.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (symbol, range) in case["range_constraints"].as_object().unwrap() {
        let bound = format!("{symbol}<{}..={}>", range["min"], range["max"]);
        assert!(text.contains(&bound), "'{bound}' not in:\n{text}");
    }
    assert!(text.contains("parameters: "), "{text}");
    for op in case["ops"].as_array().unwrap() {
        assert!(text.contains(op.as_str().unwrap()), "{op} not in:\n{text}");
    }
}

/// The archive `path` with every node target `from` renamed `to` (members stored).
fn renamed_target(path: &Path, from: &str, to: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(std::fs::read(path).unwrap())).unwrap();
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for i in 0..zip.len() {
        let mut file = zip.by_index(i).unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        if file.name().ends_with("models/model.json") {
            bytes = String::from_utf8(bytes).unwrap().replace(&format!("\"{from}\""), &format!("\"{to}\"")).into_bytes();
        }
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        writer.start_file(file.name(), options).unwrap();
        writer.write_all(&bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// Before a build starts, `inspect` lists the targets an import would reject: unmapped ones,
/// and the training gradients rbuild does not import, with the reason.
#[test]
fn inspect_lists_unmapped_targets() {
    let archive = common::testdata().join("pt2_ops/aten__abs.out/int32.pt2");
    let out = rbuild(&["inspect", archive.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("unmapped: none"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("edited.pt2");
    std::fs::write(&edited, renamed_target(&archive, "torch.ops.aten.abs.default", "torch.ops.mylib.fancy.default")).unwrap();
    let out = rbuild(&["inspect", edited.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("unmapped: mylib::fancy.default (x1)"), "{text}");
    let report = inspect_json(&edited);
    assert_eq!(report["models"][0]["unmapped"][0]["op"], "mylib::fancy.default", "{report}");

    let gradient = dir.path().join("gradient.pt2");
    std::fs::write(&gradient, renamed_target(&archive, "torch.ops.aten.abs.default", "torch.ops.aten.embedding_dense_backward.default")).unwrap();
    let out = rbuild(&["inspect", gradient.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unmapped: none") && text.contains("not imported: aten::embedding_dense_backward") && text.contains("gradient"), "{text}");
}

#[test]
fn damaged_archives_fail_naming_file_and_member() {
    let original = std::fs::read(pt2_dir().join("zoo_tied_lm.pt2")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated.pt2");
    std::fs::write(&truncated, &original[..original.len() / 3]).unwrap();
    // A byte flipped inside the program JSON: its CRC no longer matches.
    let corrupted = dir.path().join("corrupted.pt2");
    let json_at = original.windows(5).position(|w| w == b"\"as_t").unwrap();
    let mut bytes = original.clone();
    bytes[json_at + 1] ^= 0x20;
    std::fs::write(&corrupted, &bytes).unwrap();
    for (path, member) in [(&truncated, None), (&corrupted, Some("models/model.json"))] {
        let out = rbuild(&["inspect", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains(path.to_str().unwrap()), "the file is not named: {err}");
        if let Some(member) = member {
            assert!(err.contains(member), "the member is not named: {err}");
        }
    }
}
