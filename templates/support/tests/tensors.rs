//! safetensors files: round trips for every dtype rbuild reads, numeric readings, and the
//! malformed files of the shared testdata rejected with the tensor at fault named.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rbuild_runner_support::tensors::{self, HostTensor};
use rbuild_runtime::ScalarType;

fn bad(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/bad").join(name)
}

fn tensor(dtype: ScalarType, shape: &[usize], data: Vec<u8>) -> HostTensor {
    HostTensor { dtype, shape: shape.to_vec(), data }
}

#[test]
fn every_dtype_round_trips_and_reads_as_numbers() {
    let cases = [
        (tensor(ScalarType::Float, &[2], [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect()), vec![1.5, -2.0]),
        (tensor(ScalarType::Double, &[1], 0.25f64.to_le_bytes().to_vec()), vec![0.25]),
        (tensor(ScalarType::Half, &[1], 0x3c00u16.to_le_bytes().to_vec()), vec![1.0]),
        (tensor(ScalarType::BFloat16, &[1], 0xc000u16.to_le_bytes().to_vec()), vec![-2.0]),
        (tensor(ScalarType::Char, &[2], vec![0xff, 7]), vec![-1.0, 7.0]),
        (tensor(ScalarType::Byte, &[1], vec![200]), vec![200.0]),
        (tensor(ScalarType::Short, &[1], (-300i16).to_le_bytes().to_vec()), vec![-300.0]),
        (tensor(ScalarType::Int, &[1], (-70000i32).to_le_bytes().to_vec()), vec![-70000.0]),
        (tensor(ScalarType::Long, &[1, 1], (1i64 << 40).to_le_bytes().to_vec()), vec![(1u64 << 40) as f64]),
        (tensor(ScalarType::Bool, &[3], vec![1, 0, 1]), vec![1.0, 0.0, 1.0]),
        (tensor(ScalarType::UInt16, &[1], 65535u16.to_le_bytes().to_vec()), vec![65535.0]),
        (tensor(ScalarType::Float, &[0, 4], vec![]), vec![]),
        (HostTensor::scalar(ScalarType::Long, 9i64.to_le_bytes().to_vec()), vec![9.0]),
    ];
    let named: Vec<(String, HostTensor)> = cases.iter().enumerate().map(|(i, (t, _))| (format!("output.{i}"), t.clone())).collect();
    let back = tensors::parse(&tensors::serialize(&named).unwrap()).unwrap();
    assert_eq!(back.len(), cases.len());
    for (i, (t, want)) in cases.iter().enumerate() {
        let got = &back[&format!("output.{i}")];
        assert_eq!(got, t);
        assert_eq!(got.values_f64().unwrap(), *want, "{}", t.dtype);
    }
    assert_eq!(tensors::numbered(&back, "output").len(), cases.len());
}

#[test]
fn numbered_stops_at_the_first_gap() {
    let t = tensor(ScalarType::Bool, &[1], vec![1]);
    let map: BTreeMap<String, HostTensor> = ["input.0", "input.1", "input.3", "other"].iter().map(|n| (n.to_string(), t.clone())).collect();
    assert_eq!(tensors::numbered(&map, "input").len(), 2);
    assert!(tensors::numbered(&map, "output").is_empty());
}

#[test]
fn dtypes_safetensors_cannot_store_are_named() {
    let t = tensor(ScalarType::ComplexFloat, &[1], vec![0; 8]);
    let e = tensors::serialize(&[("output.3".into(), t)]).unwrap_err();
    assert!(e.contains("output.3") && e.contains("complex64"), "{e}");
    // A shape that does not match the bytes: named too.
    let e = tensors::serialize(&[("x".into(), tensor(ScalarType::Float, &[3], vec![0; 8]))]).unwrap_err();
    assert!(e.contains("'x'"), "{e}");
}

#[test]
fn malformed_files_fail_naming_the_file_and_the_tensor_at_fault() {
    let dir = bad("");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("st_") && name.ends_with(".safetensors")) {
            continue;
        }
        let e = tensors::read_file(&p).unwrap_err().0;
        assert!(e.starts_with(&p.display().to_string()) && e.contains("not a valid safetensors file"), "{name}: {e}");
        n += 1;
    }
    assert!(n >= 7, "only {n} malformed safetensors files in {}", dir.display());
    // The header describes tensor `a` wrongly: the message says which tensor and how.
    let e = tensors::read_file(&bad("st_shape_mismatch.safetensors")).unwrap_err().0;
    assert!(e.contains("tensor 'a': F32 [3, 3] needs 36 bytes, its data_offsets [0, 24] give 24"), "{e}");
    let e = tensors::read_file(&bad("st_offsets_past_end.safetensors")).unwrap_err().0;
    assert!(e.contains("tensor 'a'") && e.contains("[0, 4096]"), "{e}");
    // A missing file is named as well.
    let e = tensors::read_file(&bad("no-such.safetensors")).unwrap_err().0;
    assert!(e.contains("no-such.safetensors"), "{e}");
    // The control file parses.
    let ok = tensors::read_file(&bad("valid_small.safetensors")).unwrap();
    assert_eq!(ok["a"].values_f64().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn write_file_is_atomic_and_names_a_missing_folder() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.safetensors");
    std::fs::write(&p, "old").unwrap();
    let t = tensor(ScalarType::Int, &[2], vec![1, 0, 0, 0, 2, 0, 0, 0]);
    tensors::write_file(&p, &[("output.0".into(), t.clone())]).unwrap();
    assert_eq!(tensors::read_numbered(&p, "output").unwrap(), [t]);
    // No temporary file left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    // A folder that does not exist: an error naming the path, nothing written.
    let missing = d.path().join("missing/out.safetensors");
    let e = tensors::write_file(&missing, &[]).unwrap_err().0;
    assert!(e.contains("missing/out.safetensors"), "{e}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}
