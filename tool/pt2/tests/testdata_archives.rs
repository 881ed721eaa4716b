//! The reader on the real `torch.export.save` archives in `../shared/testdata/pt2`: every
//! archive resolves, every case's json agrees with what the reader finds, and weights equal
//! the safetensors checkpoints they were exported from.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{files_with_extension, pt2_dir, read_members, testdata};
use rbuild_pt2::schema::RangeConstraint;
use rbuild_pt2::{payload_view, Dim, GraphInput, PayloadKind, Pt2Archive, UserTensor};
use serde_json::Value;

#[test]
fn every_archive_resolves_with_every_payload_viewed() {
    let archives = files_with_extension("pt2");
    assert!(archives.len() >= 3, "expected the testdata archives in {}", pt2_dir().display());
    for path in &archives {
        let archive = Pt2Archive::open(path).unwrap_or_else(|e| panic!("{e}"));
        let model = archive.default_model().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(model.program.schema_version.major, 8, "{}", path.display());
        assert_eq!(model.graph_inputs.len(), model.graph().inputs.len());
        assert!(!model.inputs.is_empty() && !model.outputs.is_empty(), "{}", path.display());
        for input in &model.graph_inputs {
            if let Some(view) = input.tensor() {
                assert_eq!(view.contiguous_bytes().len(), view.nbytes(), "{}: {}", path.display(), view.name);
            }
        }
        // Config entries the signature does not reference must view cleanly too.
        for kind in [PayloadKind::Weights, PayloadKind::Constants] {
            let config = archive.payload_config(kind, &model.name).unwrap();
            for (fqn, meta) in &config.config {
                let view = payload_view(&archive, kind, &model.name, fqn, meta).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(view.contiguous_bytes().len(), view.nbytes());
            }
        }
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn dims_text(dims: &[Dim]) -> String {
    format!("{dims:?}")
}

/// A user tensor against a case's `{name, dtype, shape}`: dtype and static dims equal, a
/// dynamic dim's case size inside its bounds.
fn check_tensor(case: &str, tensor: &UserTensor, expected: &Value) {
    assert_eq!(tensor.dtype.name(), expected["dtype"].as_str().unwrap(), "{case}: {} dtype", tensor.name);
    let shape: Vec<usize> =
        expected["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    assert_eq!(tensor.dims.len(), shape.len(), "{case}: {} rank {}", tensor.name, dims_text(&tensor.dims));
    for (dim, &size) in tensor.dims.iter().zip(&shape) {
        match dim {
            Dim::Static(n) => assert_eq!(*n, size, "{case}: {} dims {}", tensor.name, dims_text(&tensor.dims)),
            Dim::Dynamic { min, max, .. } => {
                assert!(*min <= size && max.is_none_or(|m| size <= m), "{case}: {size} outside {dim:?}")
            }
            Dim::Derived { .. } => {}
        }
    }
}

#[test]
fn cases_match_their_json() {
    let cases: Vec<_> = files_with_extension("json").into_iter().filter(|p| json(p).get("archive").is_some()).collect();
    let archives = files_with_extension("pt2");
    for archive_path in &archives {
        let file_name = archive_path.file_name().unwrap().to_str().unwrap();
        assert!(cases.iter().any(|c| json(c)["archive"] == file_name), "{file_name} has no case json naming it");
    }
    for case_path in &cases {
        let case = case_path.file_name().unwrap().to_str().unwrap();
        let meta = json(case_path);
        let archive = Pt2Archive::open(pt2_dir().join(meta["archive"].as_str().unwrap())).unwrap();
        let model = archive.default_model().unwrap();

        let inputs = meta["inputs"].as_array().unwrap();
        assert_eq!(model.inputs.len(), inputs.len(), "{case}: user inputs");
        for (input, expected) in model.inputs.iter().zip(inputs) {
            check_tensor(case, input, expected);
        }
        let outputs = meta["outputs"].as_array().unwrap();
        assert_eq!(model.outputs.len(), outputs.len(), "{case}: user outputs");
        for (output, expected) in model.outputs.iter().zip(outputs) {
            check_tensor(case, output, expected);
        }

        if let Some(ranges) = meta.get("range_constraints").and_then(Value::as_object) {
            assert_eq!(model.program.range_constraints.len(), ranges.len(), "{case}: range_constraints");
            for (symbol, range) in ranges {
                let expected = RangeConstraint { min_val: range["min"].as_i64(), max_val: range["max"].as_i64() };
                assert_eq!(model.range(symbol), Some(expected), "{case}: {symbol}");
            }
            for input in &model.inputs {
                for dim in &input.dims {
                    if let Dim::Dynamic { symbol, min, max, .. } = dim {
                        let range = &ranges[symbol.as_str()];
                        assert_eq!(Some(*min as u64), range["min"].as_u64(), "{case}: {symbol} min");
                        assert_eq!(max.map(|m| m as u64), range["max"].as_u64(), "{case}: {symbol} max");
                    }
                }
            }
        }

        let expected_ops: BTreeSet<&str> =
            meta["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        let ops: BTreeSet<String> = model.graph().nodes.iter().map(|n| n.op_name()).collect();
        let ops: BTreeSet<&str> = ops.iter().map(String::as_str).collect();
        assert_eq!(ops, expected_ops, "{case}: node targets");
    }
}

/// Parameters (and buffers the checkpoint holds) equal the checkpoint's tensors, by name with
/// `prefix` stripped; every checkpoint tensor is found.
fn check_against_checkpoint(archive_name: &str, checkpoint: &Path, prefix: &str) {
    let archive = Pt2Archive::open(pt2_dir().join(archive_name)).unwrap();
    let model = archive.default_model().unwrap();
    let file = std::fs::read(checkpoint).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&file).unwrap();
    let stored = model.parameters().chain(model.buffers().map(|(name, _, view)| (name, view)));
    let mut matched = BTreeSet::new();
    for (fqn, view) in stored {
        let name =
            fqn.strip_prefix(prefix).unwrap_or_else(|| panic!("{archive_name}: '{fqn}' lacks prefix '{prefix}'"));
        let Ok(expected) = tensors.tensor(name) else {
            assert!(
                model.buffers().any(|(b, _, _)| b == fqn),
                "{archive_name}: parameter '{name}' not in the checkpoint"
            );
            continue;
        };
        assert_eq!(view.sizes, expected.shape(), "{archive_name}: {name} shape");
        assert_eq!(format!("{:?}", expected.dtype()).to_lowercase(), dtype_code(view.dtype.name()), "{name}");
        assert!(view.contiguous_bytes() == expected.data(), "{archive_name}: {name} values differ");
        matched.insert(name.to_string());
    }
    let all: BTreeSet<String> = tensors.names().into_iter().map(str::to_string).collect();
    assert_eq!(matched, all, "{archive_name}: checkpoint tensors without an archive twin");
}

/// safetensors' dtype spelling (`F32`, `I64`) for a PyTorch dtype name.
fn dtype_code(name: &str) -> String {
    match name {
        "float32" => "f32",
        "float16" => "f16",
        "bfloat16" => "bf16",
        "int64" => "i64",
        "int32" => "i32",
        "bool" => "bool",
        other => other,
    }
    .to_string()
}

#[test]
fn mobilenet_v2_weights_equal_its_checkpoint() {
    check_against_checkpoint("mobilenet_v2.pt2", &testdata().join("models/mobilenet_v2/model.safetensors"), "");
}

#[test]
fn llama_tiny_weights_equal_its_checkpoint() {
    // The export wrapped the HF model as attribute `m`.
    let checkpoint = testdata().join("models/llama_tiny/model.safetensors");
    check_against_checkpoint("llama_tiny_fullseq.pt2", &checkpoint, "m.");
    check_against_checkpoint("llama_tiny_fullseq.core_aten.pt2", &checkpoint, "m.");
}

#[test]
fn tied_weights_share_one_storage() {
    let archive = Pt2Archive::open(pt2_dir().join("zoo_tied_lm.pt2")).unwrap();
    let model = archive.default_model().unwrap();
    let params: Vec<_> = model.parameters().collect();
    let shared: Vec<(&str, &str)> = params
        .iter()
        .enumerate()
        .flat_map(|(i, (a, va))| {
            params[i + 1..].iter().filter(|(_, vb)| va.shares_storage_with(vb)).map(move |(b, _)| (*a, *b))
        })
        .collect();
    assert_eq!(shared, [("emb.weight", "head.weight")]);
    let (emb, head) = (
        model.parameters().find(|p| p.0 == "emb.weight").unwrap().1,
        model.parameters().find(|p| p.0 == "head.weight").unwrap().1,
    );
    assert_eq!(emb.contiguous_bytes(), head.contiguous_bytes());
    assert_eq!(emb.storage_member, head.storage_member);
}

#[test]
fn rank0_buffer_and_constant_read_their_storages() {
    let path = pt2_dir().join("zoo_scalars_where.pt2");
    let archive = Pt2Archive::open(&path).unwrap();
    let model = archive.default_model().unwrap();
    let members = read_members(&std::fs::read(&path).unwrap());
    let raw = |suffix: &str| members.iter().find(|(n, _)| n.ends_with(suffix)).unwrap().1.clone();
    let mut seen = Vec::new();
    for input in &model.graph_inputs {
        if let GraphInput::Buffer { fqn, persistent, tensor, .. } = input {
            assert!(tensor.sizes.is_empty() && tensor.strides.is_empty(), "{fqn} is rank 0");
            assert_eq!(tensor.numel(), 1);
            let folder = if *persistent { "data/weights/" } else { "data/constants/" };
            assert!(tensor.storage_member.contains(folder), "{fqn} from {}", tensor.storage_member);
            let member = tensor.storage_member.rsplit('/').next().unwrap();
            assert_eq!(*tensor.contiguous_bytes(), raw(&format!("{folder}{member}"))[..4], "{fqn}");
            seen.push((fqn.clone(), *persistent));
        }
    }
    assert_eq!(seen, [("threshold".to_string(), true), ("scale".to_string(), false)]);
}

#[test]
fn dynamic_input_has_bounds_and_hint() {
    let archive = Pt2Archive::open(pt2_dir().join("zoo_transformer_dyn.pt2")).unwrap();
    let model = archive.default_model().unwrap();
    let ids = &model.inputs[0];
    assert!(matches!(&ids.dims[0], Dim::Static(1)));
    let Dim::Dynamic { symbol, min, max, hint } = &ids.dims[1] else { panic!("{:?}", ids.dims) };
    let range = model.range(symbol).unwrap();
    assert_eq!((Some(*min as i64), max.map(|m| m as i64)), (range.min_val, range.max_val));
    assert!(hint.is_some_and(|h| h >= *min && max.is_none_or(|m| h <= m)));
}

#[test]
fn training_ir_in_place_buffer_updates_are_found() {
    let archive = Pt2Archive::open(pt2_dir().join("zoo_mutated_buffer.pt2")).unwrap();
    let model = archive.default_model().unwrap();
    let buffers: BTreeSet<&str> = model.buffers().map(|b| b.0).collect();
    let written: BTreeSet<String> = model.in_place_buffer_writes().into_iter().map(|w| w.buffer).collect();
    let written: BTreeSet<&str> = written.iter().map(String::as_str).collect();
    assert!(!buffers.is_empty());
    assert_eq!(written, buffers, "every buffer of this module is updated in place");
    // A module without state writes nothing.
    let archive = Pt2Archive::open(pt2_dir().join("zoo_tied_lm.pt2")).unwrap();
    assert!(archive.default_model().unwrap().in_place_buffer_writes().is_empty());
}
