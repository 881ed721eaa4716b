//! Damaged and unsupported archives, written into a tempdir from a real one: each is a clean
//! error of the right kind naming the archive and the member, never a panic.

mod common;

use std::io::Cursor;

use common::{edit_json, edited_archive, pt2_dir, read_members, write_zip};
use rbuild_pt2::{payload_view, ErrorKind, PayloadKind, Pt2Archive, Pt2Error};
use serde_json::json;
use zip::CompressionMethod;

const BASE: &str = "zoo_tied_lm.pt2";

/// Writes `bytes` to a file in a tempdir and opens it and its default model.
fn open_bytes(bytes: &[u8]) -> (Result<(), Pt2Error>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.pt2");
    std::fs::write(&path, bytes).unwrap();
    let result = Pt2Archive::open(&path).and_then(|a| a.default_model().map(|_| ()));
    (result, path.display().to_string())
}

/// Expects an error of `kind` whose member ends with `member` (or no member when empty) and
/// whose message contains `words`.
fn expect_error(bytes: &[u8], kind: ErrorKind, member: &str, words: &str) -> Pt2Error {
    let (result, path) = open_bytes(bytes);
    let error = result.expect_err("a damaged archive must not open");
    let text = error.to_string();
    assert_eq!(error.kind, kind, "{text}");
    assert!(text.starts_with(&path), "the message names the archive: {text}");
    match &error.member {
        Some(m) => assert!(!member.is_empty() && m.ends_with(member), "member {m}, expected …{member}: {text}"),
        None => assert!(member.is_empty(), "expected member {member}: {text}"),
    }
    assert!(text.contains(words), "'{words}' not in: {text}");
    error
}

fn base_bytes() -> Vec<u8> {
    std::fs::read(pt2_dir().join(BASE)).unwrap()
}

#[test]
fn the_base_archive_opens() {
    let (result, _) = open_bytes(&base_bytes());
    result.unwrap();
}

#[test]
fn truncated_archives_fail_cleanly() {
    let bytes = base_bytes();
    // Every cut point in steps, and the last bytes one by one (the end-of-directory record).
    let cuts = (0..bytes.len()).step_by(499).chain(bytes.len() - 30..bytes.len());
    for keep in cuts {
        let (result, _) = open_bytes(&bytes[..keep]);
        let error = result.expect_err("truncated");
        assert_eq!(error.kind, ErrorKind::Zip, "cut at {keep}: {error}");
        assert!(error.to_string().contains("truncated"), "cut at {keep}: {error}");
    }
}

#[test]
fn random_bytes_are_not_an_archive() {
    let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    expect_error(&noise, ErrorKind::Zip, "", "not a zip archive");
}

#[test]
fn corrupted_storage_fails_its_crc_naming_the_member() {
    let mut bytes = base_bytes();
    let start = {
        let mut zip = zip::ZipArchive::new(Cursor::new(&bytes[..])).unwrap();
        let index = zip.index_for_name("zoo_tied_lm/data/weights/weight_3").unwrap();
        let member = zip.by_index_raw(index).unwrap();
        member.data_start() as usize
    };
    bytes[start + 100] ^= 0x40;
    expect_error(&bytes, ErrorKind::Zip, "data/weights/weight_3", "CRC");
}

#[test]
fn corrupted_json_names_the_member_and_path() {
    let cut =
        edited_archive(BASE, |name, b| Some(if name == "models/model.json" { b[..b.len() / 2].to_vec() } else { b }));
    expect_error(&cut, ErrorKind::Json, "models/model.json", "malformed JSON");

    let bad_kind = edited_archive(BASE, |name, b| {
        Some(if name == "models/model.json" {
            edit_json(b, |v| {
                let arg = &mut v["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"];
                *arg = json!({"as_tensor_v2": arg["as_tensor"].clone()});
            })
        } else {
            b
        })
    });
    expect_error(&bad_kind, ErrorKind::Json, "models/model.json", "graph_module.graph.nodes[0].inputs[0].arg");

    let bad_config = edited_archive(BASE, |name, b| {
        Some(if name == "data/weights/model_weights_config.json" { b"{\"config\": [".to_vec() } else { b })
    });
    expect_error(&bad_config, ErrorKind::Json, "data/weights/model_weights_config.json", "malformed JSON");
}

#[test]
fn missing_members_are_named() {
    for (dropped, kind, words) in [
        ("data/weights/model_weights_config.json", ErrorKind::Layout, "missing member"),
        ("data/constants/model_constants_config.json", ErrorKind::Layout, "missing member"),
        ("data/weights/weight_0", ErrorKind::Layout, "the storage of 'emb.weight'"),
        ("archive_format", ErrorKind::Layout, "no archive_format member"),
    ] {
        let bytes = edited_archive(BASE, |name, b| (name != dropped).then_some(b));
        let member = if dropped == "archive_format" { "" } else { dropped };
        expect_error(&bytes, kind, member, words);
    }
    let no_model = edited_archive(BASE, |name, b| (name != "models/model.json").then_some(b));
    expect_error(&no_model, ErrorKind::Layout, "", "no zoo_tied_lm/models/<name>.json");
}

#[test]
fn unknown_schema_major_version_is_named() {
    let bytes = edited_archive(BASE, |name, b| {
        Some(if name == "models/model.json" {
            edit_json(b, |v| v["schema_version"] = json!({"major": 9, "minor": 1}))
        } else {
            b
        })
    });
    expect_error(&bytes, ErrorKind::Unsupported, "models/model.json", "schema version 9.1");
}

#[test]
fn header_members_are_checked() {
    let big = edited_archive(BASE, |name, b| Some(if name == "byteorder" { b"big".to_vec() } else { b }));
    expect_error(&big, ErrorKind::Unsupported, "byteorder", "big-endian");
    let format = edited_archive(BASE, |name, b| Some(if name == "archive_format" { b"pt3".to_vec() } else { b }));
    expect_error(&format, ErrorKind::Layout, "archive_format", "expected \"pt2\"");
}

#[test]
fn the_pre_2_8_layout_is_named() {
    let members = vec![
        ("old/serialized_exported_program.json".to_string(), b"{}".to_vec()),
        ("old/serialized_state_dict.pt".to_string(), vec![0x80, 0x02]),
        ("old/version".to_string(), b"1".to_vec()),
    ];
    expect_error(
        &write_zip(&members, CompressionMethod::Stored),
        ErrorKind::Layout,
        "serialized_exported_program.json",
        "pre-2.8",
    );
}

/// Sets `fqn`'s tensor_meta fields in the weights config.
fn with_weight_meta(fqn: &'static str, meta: serde_json::Value) -> Vec<u8> {
    edited_archive(BASE, move |name, b| {
        Some(if name == "data/weights/model_weights_config.json" {
            edit_json(b, |v| {
                for (key, value) in meta.as_object().unwrap() {
                    v["config"][fqn]["tensor_meta"][key] = value.clone();
                }
            })
        } else {
            b
        })
    })
}

#[test]
fn a_view_past_its_storage_is_named() {
    // emb.weight is [64, 24] f32: one more row reads past weight_0.
    let rows = with_weight_meta("emb.weight", json!({"sizes": [{"as_int": 65}, {"as_int": 24}]}));
    expect_error(&rows, ErrorKind::Tensor, "data/weights/weight_0", "needs 6240 bytes but the storage has 6144");
    let offset = with_weight_meta("fc1.bias", json!({"storage_offset": {"as_int": 1}}));
    expect_error(&offset, ErrorKind::Tensor, "data/weights/weight_4", "'fc1.bias'");
    let far = with_weight_meta("fc1.bias", json!({"strides": [{"as_int": i64::MAX}], "sizes": [{"as_int": 2}]}));
    expect_error(&far, ErrorKind::Tensor, "data/weights/weight_4", "needs 36893488147419103232 bytes");
    // Stride 0 keeps the storage small, but the elements could not be addressed.
    let huge = with_weight_meta("fc1.bias", json!({"strides": [{"as_int": 0}], "sizes": [{"as_int": i64::MAX}]}));
    expect_error(&huge, ErrorKind::Tensor, "data/weights/weight_4", "exceed the address space");
    let negative = with_weight_meta("fc1.bias", json!({"strides": [{"as_int": -1}]}));
    expect_error(&negative, ErrorKind::Tensor, "data/weights/weight_4", "negative");
    let dtype = with_weight_meta("fc1.bias", json!({"dtype": 33}));
    expect_error(&dtype, ErrorKind::Unsupported, "data/weights/weight_4", "FLOAT8E8M0FNU");
}

#[test]
fn a_config_contradicting_the_graph_is_named() {
    // A valid view of the same storage, but not the shape the graph declares.
    let bytes = with_weight_meta(
        "fc1.weight",
        json!({"sizes": [{"as_int": 24}, {"as_int": 72}], "strides": [{"as_int": 72}, {"as_int": 1}]}),
    );
    expect_error(&bytes, ErrorKind::Tensor, "data/weights/model_weights_config.json", "in the graph");
}

#[test]
fn strided_and_offset_views_read_the_right_elements() {
    let original = Pt2Archive::open(pt2_dir().join(BASE)).unwrap();
    let model = original.default_model().unwrap();
    let fc1 = model.parameters().find(|p| p.0 == "fc1.weight").unwrap().1;
    let (rows, cols) = (fc1.sizes[0], fc1.sizes[1]);
    let element = |bytes: &[u8], i: usize| bytes[i * 4..i * 4 + 4].to_vec();
    let dense = fc1.contiguous_bytes();

    // The transpose, as PyTorch would store `w.t()`: sizes swapped, strides [1, cols].
    let transposed = with_weight_meta(
        "fc1.weight",
        json!({"sizes": [{"as_int": cols}, {"as_int": rows}], "strides": [{"as_int": 1}, {"as_int": cols}]}),
    );
    let archive = Pt2Archive::from_bytes(transposed, "transposed.pt2").unwrap();
    let config = archive.payload_config(PayloadKind::Weights, "model").unwrap();
    let view =
        payload_view(&archive, PayloadKind::Weights, "model", "fc1.weight", &config.config["fc1.weight"]).unwrap();
    assert!(!view.is_contiguous());
    let gathered = view.contiguous_bytes();
    assert!(matches!(gathered, std::borrow::Cow::Owned(_)));
    for c in 0..cols {
        for r in 0..rows {
            assert_eq!(element(&gathered, c * rows + r), element(&dense, r * cols + c), "[{c}, {r}]");
        }
    }

    // Rows 1.. of the same storage: an offset view is borrowed, not copied.
    let offset = with_weight_meta(
        "fc1.weight",
        json!({"sizes": [{"as_int": rows - 1}, {"as_int": cols}], "storage_offset": {"as_int": cols}}),
    );
    let archive = Pt2Archive::from_bytes(offset, "offset.pt2").unwrap();
    let config = archive.payload_config(PayloadKind::Weights, "model").unwrap();
    let view =
        payload_view(&archive, PayloadKind::Weights, "model", "fc1.weight", &config.config["fc1.weight"]).unwrap();
    let bytes = view.contiguous_bytes();
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));
    assert_eq!(*bytes, dense[cols * 4..]);
}

#[test]
fn expanded_views_repeat_their_storage() {
    // `bias.expand(3, n)`: stride 0 over the rows, one storage row read three times.
    let original = Pt2Archive::open(pt2_dir().join(BASE)).unwrap();
    let model = original.default_model().unwrap();
    let bias = model.parameters().find(|p| p.0 == "fc1.bias").unwrap().1.contiguous_bytes().into_owned();
    let n = bias.len() / 4;
    let expanded = with_weight_meta(
        "fc1.bias",
        json!({"sizes": [{"as_int": 3}, {"as_int": n}], "strides": [{"as_int": 0}, {"as_int": 1}]}),
    );
    let archive = Pt2Archive::from_bytes(expanded, "expanded.pt2").unwrap();
    let config = archive.payload_config(PayloadKind::Weights, "model").unwrap();
    let view = payload_view(&archive, PayloadKind::Weights, "model", "fc1.bias", &config.config["fc1.bias"]).unwrap();
    assert_eq!(*view.contiguous_bytes(), bias.repeat(3));
}

#[test]
fn empty_storages_view_empty_tensors() {
    let bytes = edited_archive(BASE, |name, b| {
        Some(match name {
            "data/weights/weight_4" => Vec::new(),
            "data/weights/model_weights_config.json" => {
                edit_json(b, |v| v["config"]["fc1.bias"]["tensor_meta"]["sizes"] = json!([{"as_int": 0}]))
            }
            _ => b,
        })
    });
    let archive = Pt2Archive::from_bytes(bytes, "empty.pt2").unwrap();
    let config = archive.payload_config(PayloadKind::Weights, "model").unwrap();
    let view = payload_view(&archive, PayloadKind::Weights, "model", "fc1.bias", &config.config["fc1.bias"]).unwrap();
    assert_eq!((view.numel(), view.storage.len(), view.contiguous_bytes().len()), (0, 0, 0));
}

#[test]
fn deflated_archives_read_the_same_values() {
    let stored = base_bytes();
    let deflated = write_zip(&read_members(&stored), CompressionMethod::Deflated);
    assert!(deflated.len() < stored.len());
    let a = Pt2Archive::from_bytes(stored, "stored.pt2").unwrap();
    let b = Pt2Archive::from_bytes(deflated, "deflated.pt2").unwrap();
    let (ma, mb) = (a.default_model().unwrap(), b.default_model().unwrap());
    let values = |m: &rbuild_pt2::ExportedModel<'_>| -> Vec<(String, Vec<u8>)> {
        m.parameters().map(|(n, v)| (n.to_string(), v.contiguous_bytes().into_owned())).collect()
    };
    assert_eq!(values(&ma), values(&mb));
    assert!(!values(&ma).is_empty());
}
