//! Input checks against a method's signature (static and dynamic shapes, scalars, counts) with
//! errors naming the tensor; binding and reading outputs of a real program; the verify
//! protocol's lines; program loading errors.

use std::path::{Path, PathBuf};

use rbuild_runner_support::binding::{self, InputSpec, Signature};
use rbuild_runner_support::program::{self, Embedded};
use rbuild_runner_support::tensors::{self, HostTensor};
use rbuild_runner_support::{all_kernels, protocol, stats};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, ScalarType};

fn bad(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/bad").join(name)
}

fn zeros(dtype: ScalarType, shape: &[usize]) -> HostTensor {
    HostTensor { dtype, shape: shape.to_vec(), data: vec![0; shape.iter().product::<usize>() * dtype.size()] }
}

#[test]
fn static_inputs_take_exactly_their_dtype_and_shape() {
    let spec = InputSpec::Tensor { dtype: ScalarType::Float, shape: vec![2, 8], dynamic: false };
    assert_eq!(spec.describe(), "float32 [2, 8]");
    spec.check(&zeros(ScalarType::Float, &[2, 8])).unwrap();
    assert_eq!(spec.check(&zeros(ScalarType::Float, &[2, 7])).unwrap_err(), "expected shape [2, 8], got [2, 7]");
    assert_eq!(spec.check(&zeros(ScalarType::Float, &[1, 2, 8])).unwrap_err(), "expected shape [2, 8], got [1, 2, 8]");
    assert_eq!(spec.check(&zeros(ScalarType::Double, &[2, 8])).unwrap_err(), "expected dtype float32, got float64");
    // Bytes that do not fill the shape (a tensor made in code, not read from a file).
    let short = HostTensor { data: vec![0; 60], ..zeros(ScalarType::Float, &[2, 8]) };
    assert_eq!(spec.check(&short).unwrap_err(), "float32 [2, 8] needs 64 bytes, has 60");
}

#[test]
fn dynamic_inputs_take_any_shape_within_their_bound() {
    let spec = InputSpec::Tensor { dtype: ScalarType::Long, shape: vec![1, 16], dynamic: true };
    assert_eq!(spec.describe(), "int64 [≤1, ≤16]");
    for ok in [[1, 16], [1, 1], [1, 5], [0, 3]] {
        spec.check(&zeros(ScalarType::Long, &ok)).unwrap();
    }
    let e = spec.check(&zeros(ScalarType::Long, &[1, 17])).unwrap_err();
    assert!(e.contains("dim 1 is above its bound 16") && e.contains("got [1, 17]"), "{e}");
    // Fewer elements than the bound but in the wrong layout: each dim counts, not the total.
    let e = spec.check(&zeros(ScalarType::Long, &[2, 4])).unwrap_err();
    assert!(e.contains("dim 0 is above its bound 1"), "{e}");
    let e = spec.check(&zeros(ScalarType::Long, &[16])).unwrap_err();
    assert!(e.contains("rank 1, not 2"), "{e}");
}

#[test]
fn scalar_inputs_take_one_element_tensors() {
    InputSpec::Int.check(&HostTensor::scalar(ScalarType::Long, 3i64.to_le_bytes().to_vec())).unwrap();
    InputSpec::Int.check(&zeros(ScalarType::Long, &[1])).unwrap();
    InputSpec::Double.check(&zeros(ScalarType::Double, &[])).unwrap();
    InputSpec::Bool.check(&zeros(ScalarType::Bool, &[1, 1])).unwrap();
    let e = InputSpec::Int.check(&zeros(ScalarType::Int, &[1])).unwrap_err();
    assert_eq!(e, "expected an Int (one int64 element), got int32 [1]");
    assert!(InputSpec::Bool.check(&zeros(ScalarType::Bool, &[2])).is_err());
    assert!(InputSpec::Other("IntList").check(&zeros(ScalarType::Long, &[1])).unwrap_err().contains("IntList"));
}

#[test]
fn input_counts_are_checked_naming_the_missing_or_extra_tensor() {
    let sig = Signature {
        method: "forward".into(),
        inputs: vec![InputSpec::Tensor { dtype: ScalarType::Float, shape: vec![1], dynamic: false }, InputSpec::Int],
    };
    let x = zeros(ScalarType::Float, &[1]);
    let e = sig.check(std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(e, "no tensor input.1: method 'forward' takes 2 input(s) (input.0 … input.1)");
    let e = sig.check(&[x.clone(), zeros(ScalarType::Long, &[1]), x.clone()]).unwrap_err();
    assert_eq!(e, "input.2 is one more than method 'forward' takes (2 input(s))");
    let e = sig.check(&[x.clone(), zeros(ScalarType::Float, &[1])]).unwrap_err();
    assert!(e.starts_with("input.1: expected an Int"), "{e}");
    sig.check(&[x, zeros(ScalarType::Long, &[])]).unwrap();
}

/// `relu(Linear(8, 4)(x))` of the shared testdata, bound from its io file, run twice (inputs
/// re-bound), outputs equal to the file's.
#[test]
fn a_real_method_binds_runs_and_returns_its_outputs() {
    let file = program::read(&bad("base.pte"), true).unwrap();
    let prog = file.load().unwrap();
    let kernels = all_kernels::registry();
    let mut method = prog.load_method("forward", &kernels, &BackendRegistry::new()).unwrap();
    let sig = Signature::of(&method);
    assert_eq!(sig.inputs, [InputSpec::Tensor { dtype: ScalarType::Float, shape: vec![2, 8], dynamic: false }]);
    let io = tensors::read_file(&bad("base.io.safetensors")).unwrap();
    let inputs = tensors::numbered(&io, "input");
    for _ in 0..2 {
        sig.bind(&mut method, &inputs).unwrap();
        method.execute(&mut KernelContext::default()).unwrap();
    }
    let outputs = binding::outputs(&method).unwrap();
    let want = &io["output.0"];
    assert_eq!((outputs.len(), outputs[0].dtype, &outputs[0].shape), (1, want.dtype, &want.shape));
    let (got, want) = (outputs[0].values_f64().unwrap(), want.values_f64().unwrap());
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 + 1e-5 * b.abs()), "{got:?} vs {want:?}");
    // A wrong input through the same path: named, and the runtime's own check not reached.
    let e = sig.bind(&mut method, &[zeros(ScalarType::Float, &[2, 7])]).unwrap_err();
    assert_eq!(e, "input.0: expected shape [2, 8], got [2, 7]");
}

#[test]
fn programs_that_cannot_load_are_named() {
    for name in ["empty.pte", "truncated_16.pte", "wrong_identifier.pte"] {
        let p = bad(name);
        let e = match program::read(&p, true) {
            Ok(file) => file.load().err().unwrap().0,
            Err(e) => e.0,
        };
        assert!(e.contains(name), "{e}");
    }
    let e = program::read(Path::new("/nonexistent/model.pte"), false).err().unwrap().0;
    assert!(e.contains("/nonexistent/model.pte"), "{e}");
    // No --model and nothing embedded: the message says what to give.
    let e = program::open(None, true, Embedded::NONE).err().unwrap().0;
    assert_eq!(e, "--model is required: this binary has no embedded program");
    let e = program::open(None, true, Embedded { program: None, feature_on: true }).err().unwrap().0;
    assert!(e.contains("RBUILD_EMBED_PROGRAM was not set"), "{e}");
    // Read and mapped programs are the same bytes.
    let (mapped, read) = (program::read(&bad("base.pte"), true).unwrap(), program::read(&bad("base.pte"), false).unwrap());
    assert_eq!(mapped.bytes(), read.bytes());
    assert_eq!(read.bytes(), std::fs::read(bad("base.pte")).unwrap());
}

#[test]
fn protocol_lines_and_names() {
    assert_eq!(protocol::output_line(2, "int64", &[1, 2], &[0x01, 0xab]), "RBUILD_OUTPUT index=2 dtype=int64 shape=1,2 hex=01ab");
    assert_eq!(protocol::output_line(0, "float32", &[], &[]), "RBUILD_OUTPUT index=0 dtype=float32 shape= hex=");
    for t in [ScalarType::Float, ScalarType::Long, ScalarType::Bool, ScalarType::BFloat16, ScalarType::Char] {
        assert_eq!(protocol::dtype_from_name(t.name()), Some(t));
    }
    assert_eq!(protocol::dtype_from_name("qint8"), None);
}

#[test]
fn run_times_report_median_and_minimum() {
    let mut t = stats::RunTimes::default();
    assert_eq!(t.median_ms(), None);
    for ms in [5, 1, 3, 4] {
        t.push(std::time::Duration::from_millis(ms));
    }
    assert_eq!((t.runs(), t.median_ms(), t.min_ms()), (4, Some(4.0), Some(1.0)));
    assert_eq!(stats::mib(Some(3 << 20)), "3.0 MiB");
    assert_eq!(stats::mib(None), "n/a");
    assert!(stats::peak_rss_bytes().unwrap_or(1) > 0);
}
