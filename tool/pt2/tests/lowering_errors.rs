//! Imports rbuild cannot do fail once, with everything the user needs: every unmapped op with
//! its node count, dynamic bounds outside the archive's range, overrides naming nothing.

mod common;

use std::collections::BTreeMap;

use common::{edit_json, edited_archive, pt2_dir};
use rbuild_pt2::{lower, LowerError, LowerOptions, Pt2Archive};

fn lower_bytes(bytes: &[u8], options: &LowerOptions) -> Result<(), LowerError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.pt2");
    std::fs::write(&path, bytes).unwrap();
    let archive = Pt2Archive::open(&path).unwrap();
    let model = archive.default_model().unwrap();
    lower(&model, options).map(|_| ())
}

/// `zoo_transformer_dyn.pt2` with the call targets in `renames` replaced.
fn renamed_targets(renames: &[(&'static str, &'static str)]) -> Vec<u8> {
    let renames = renames.to_vec();
    edited_archive("zoo_transformer_dyn.pt2", move |name, b| {
        Some(if name.ends_with("models/model.json") {
            edit_json(b, |v| {
                for node in v["graph_module"]["graph"]["nodes"].as_array_mut().unwrap() {
                    for (from, to) in &renames {
                        if node["target"] == *from {
                            node["target"] = serde_json::Value::from(*to);
                        }
                    }
                }
            })
        } else {
            b
        })
    })
}

#[test]
fn every_unmapped_op_is_listed_with_its_count_at_once() {
    let bytes = renamed_targets(&[
        ("torch.ops.aten.gelu.default", "torch.ops.aten.fancy_activation.default"),
        ("torch.ops.aten.layer_norm.default", "torch.ops.mylib.custom_norm.default"),
    ]);
    let err = lower_bytes(&bytes, &LowerOptions::default()).expect_err("unmapped ops must fail");
    let LowerError::Unmapped(ops, _) = &err else { panic!("expected Unmapped, got {err}") };
    let ops: BTreeMap<&str, usize> = ops.iter().map(|(op, n)| (op.as_str(), *n)).collect();
    assert_eq!(ops.len(), 2, "{err}");
    assert!(ops["aten::fancy_activation.default"] >= 1, "{err}");
    assert!(ops["mylib::custom_norm.default"] >= 2, "every layer norm node is counted: {err}");
    let text = err.to_string();
    assert!(text.contains("fancy_activation") && text.contains("custom_norm") && text.contains("nodes"), "{text}");
}

#[test]
fn the_original_archive_lowers_and_narrowed_bounds_are_checked() {
    let bytes = std::fs::read(pt2_dir().join("zoo_transformer_dyn.pt2")).unwrap();
    lower_bytes(&bytes, &LowerOptions::default()).expect("the archive lowers with its own bounds");
    let narrow = LowerOptions { max_dims: BTreeMap::from([("s27".to_string(), 16)]) };
    lower_bytes(&bytes, &narrow).expect("a bound inside the archive's range");

    let too_big = LowerOptions { max_dims: BTreeMap::from([("s27".to_string(), 65)]) };
    let err = lower_bytes(&bytes, &too_big).unwrap_err().to_string();
    assert!(err.contains("s27") && err.contains("2..=64"), "{err}");

    let unknown = LowerOptions { max_dims: BTreeMap::from([("no_such_dim".to_string(), 8)]) };
    let err = lower_bytes(&bytes, &unknown).unwrap_err().to_string();
    assert!(err.contains("no_such_dim") && err.contains("s27"), "{err}");
}

#[test]
fn recipe_bounds_per_input_dim_map_to_the_archive_symbol() {
    let archive = Pt2Archive::open(&pt2_dir().join("zoo_transformer_dyn.pt2")).unwrap();
    let model = archive.default_model().unwrap();
    let bound = |input: &str, dim: usize, max: usize| LowerOptions::from_input_dims(&model, &[(input.to_string(), dim, max)]);
    let options = bound("ids", 1, 16).expect("ids dim 1 is dynamic");
    assert_eq!(options.max_dims, BTreeMap::from([("s27".to_string(), 16)]));
    let lowered = lower(&model, &options).unwrap();
    assert!(lowered.report.inputs.iter().any(|i| i.contains("<=16")), "{:?}", lowered.report.inputs);

    let err = bound("ids", 0, 4).unwrap_err().to_string();
    assert!(err.contains("not dynamic"), "{err}");
    let err = bound("tokens", 1, 4).unwrap_err().to_string();
    assert!(err.contains("tokens") && err.contains("ids"), "the inputs are listed: {err}");
    let err = bound("ids", 5, 4).unwrap_err().to_string();
    assert!(err.contains("2 dims"), "{err}");
}
