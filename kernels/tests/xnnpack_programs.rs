//! `XnnpackBackend` on ExecuTorch's XNNPACK-delegated programs of the shared testdata (every one
//! under `models/`, found by walking the folder): each output within the case's tolerance of
//! the PyTorch reference; int8 programs within one quantization step of ExecuTorch's own run
//! (`et_output.N`); 1 and 2 threads giving the same numbers; a corrupted weight key failing at
//! load naming it.

use std::path::PathBuf;

use rbuild_kernels::xnnpack::XnnpackBackend;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID;
use rbuild_runtime::format::PteFile;
use rbuild_runtime::{KernelContext, Program, ScalarType};
use safetensors::{Dtype, SafeTensors};

mod testdata;
use testdata::{pte_files, testdata};


fn xnnpack_cases() -> Vec<PathBuf> {
    pte_files(&testdata().join("models"))
        .into_iter()
        .filter(|p| {
            let bytes = std::fs::read(p).unwrap();
            let file = PteFile::parse(&bytes).unwrap();
            file.program.execution_plan.as_deref().unwrap_or(&[]).iter().any(|plan| plan.delegates.as_deref().unwrap_or(&[]).iter().any(|d| d.id == Some(XNNPACK_BACKEND_ID)))
        })
        .collect()
}

fn f32s(dtype: Dtype, data: &[u8]) -> Vec<f32> {
    assert_eq!(dtype, Dtype::F32);
    data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn backends() -> BackendRegistry {
    let mut b = BackendRegistry::new();
    b.register(Box::new(XnnpackBackend));
    b
}

/// Runs `forward` of `pte` on `input.0` of the io file with `threads`; the first output.
fn run(pte: &[u8], io: &SafeTensors<'_>, threads: usize) -> Vec<f32> {
    let program = Program::load(pte).unwrap();
    let kernels = rbuild_kernels::registry();
    let mut m = program.load_method("forward", &kernels, &backends()).unwrap();
    let x = io.tensor("input.0").unwrap();
    m.set_input_tensor(0, ScalarType::Float, x.shape(), x.data()).unwrap();
    m.execute(&mut KernelContext { threads }).unwrap();
    m.output_bytes(0).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn testdata_xnnpack_programs_match_reference_and_executorch() {
    let cases = xnnpack_cases();
    assert!(cases.len() >= 4, "expected the MobileNet XNNPACK programs under {}", testdata().display());
    for pte_path in &cases {
        let name = pte_path.file_name().unwrap().to_string_lossy().trim_end_matches(".pte").to_string();
        let dir = pte_path.parent().unwrap();
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
        let io_bytes = std::fs::read(dir.join(format!("{name}.io.safetensors"))).unwrap();
        let io = SafeTensors::deserialize(&io_bytes).unwrap();
        let pte = std::fs::read(pte_path).unwrap();
        let got = run(&pte, &io, 1);
        let want = io.tensor("output.0").unwrap();
        let want = f32s(want.dtype(), want.data());
        let (atol, rtol) = (meta["atol"].as_f64().unwrap() as f32, meta["rtol"].as_f64().unwrap() as f32);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= atol + rtol * w.abs(), "{}: logit {i}: {g} vs reference {w}", pte_path.display());
        }
        if name.contains("int8") {
            // ExecuTorch's outputs are scale·(q − zp): the smallest gap between distinct values
            // is one step.
            let et = io.tensor("et_output.0").unwrap();
            let et = f32s(et.dtype(), et.data());
            let mut levels = et.clone();
            levels.sort_by(f32::total_cmp);
            levels.dedup();
            let step = levels.windows(2).map(|w| w[1] - w[0]).fold(f32::INFINITY, f32::min);
            let differ = got.iter().zip(&et).filter(|(g, e)| (*g - *e).abs() > step * 0.01).count();
            let worst = got.iter().zip(&et).map(|(g, e)| (g - e).abs() / step).fold(0.0, f32::max);
            eprintln!("{}: {differ} of {} logits differ from ExecuTorch's (by at most {worst:.2} steps of {step})", pte_path.display(), et.len());
            assert!(worst <= 1.01, "{}: {worst} quantization steps from ExecuTorch's output", pte_path.display());
        }
        assert_eq!(run(&pte, &io, 2), got, "{}: 2 threads differ from 1", pte_path.display());
    }
}

#[test]
fn a_missing_weight_key_fails_at_load_naming_it() {
    let pte_path = &xnnpack_cases()[0];
    let mut pte = std::fs::read(pte_path).unwrap();
    // Rename every named-data key in the file's flatbuffer (64 hex digits), so the payload's
    // keys no longer resolve.
    let file = PteFile::parse(&pte).unwrap();
    let key = file.program.named_data.as_deref().unwrap()[0].key.unwrap().to_string();
    drop(file);
    let at = pte.windows(key.len()).position(|w| w == key.as_bytes()).unwrap();
    pte[at] = if pte[at] == b'0' { b'1' } else { b'0' };
    let program = Program::load(&pte).unwrap();
    let e = program.load_method("forward", &rbuild_kernels::registry(), &backends()).err().expect("load must fail").to_string();
    assert!(e.contains("XNNPACK") && e.contains("named data"), "{e}");
}

/// A payload `x (f32 [2, 8]) → Convert → qdint8 → reader → out`, with the reader a
/// FullyConnected (int8 weights [3, 8]) or an Add of the quantized value to itself.
fn dynamic_payload(reader_is_fc: bool, num_nonbatch_dims: i32) -> Vec<u8> {
    use rbuild_runtime::backends::xnnpack::{write_payload, ConstantRef, NodeKind, NodeParams, Quant, Scales, XnnDatatype, XnnGraph, XnnNode, XnnValue};
    let value = |datatype, dims: Vec<usize>, constant, flags, external_id, quant| XnnValue { datatype, dims, constant, external_id, flags, dq_datatype: None, quant };
    let out_dims = if reader_is_fc { vec![2, 3] } else { vec![2, 8] };
    let values = vec![
        value(XnnDatatype::Fp32, vec![2, 8], None, 1, Some(0), Quant::None),
        value(XnnDatatype::QdInt8, vec![2, 8], None, 0, None, Quant::PerTokenDynamic { num_nonbatch_dims }),
        value(XnnDatatype::QcInt8, vec![3, 8], Some(1), 0, None, Quant::PerChannel { scales: Scales::Inline(vec![0.5; 3]), channel_dim: 0 }),
        value(XnnDatatype::Fp32, out_dims, None, 2, Some(1), Quant::None),
    ];
    let reader = if reader_is_fc {
        XnnNode { kind: NodeKind::FullyConnected, params: NodeParams::FullyConnected { input: 1, filter: 2, bias: None, output: 3, flags: 0 }, debug_handle: 1, output_min_max: None }
    } else {
        XnnNode { kind: NodeKind::Add, params: NodeParams::Binary { input1: 1, input2: 1, output: 3, flags: 0 }, debug_handle: 1, output_min_max: None }
    };
    let graph = XnnGraph {
        version: "0".into(),
        values,
        nodes: vec![XnnNode { kind: NodeKind::Convert, params: NodeParams::Unary { input: 0, output: 1, flags: 0 }, debug_handle: 0, output_min_max: None }, reader],
        num_externs: 2,
        input_ids: vec![0],
        output_ids: vec![3],
        constants: vec![ConstantRef { offset: 0, size: 0, named_key: None, inline: None }, ConstantRef { offset: 0, size: 24, named_key: None, inline: None }],
    };
    write_payload(&graph, &[1u8; 24])
}

#[test]
fn dynamic_quantization_feeds_fully_connected_only() {
    let none = |_: &str| None;
    let limit = rbuild_kernels::xnnpack::DEFAULT_ACTIVATION_LIMIT;
    let fc = dynamic_payload(true, 1);
    let plan = rbuild_kernels::xnnpack::compile_payload(&fc, &none, limit).unwrap();
    assert_eq!(plan.step_names().len(), 1, "the Convert is folded into the fully connected layer: {:?}", plan.step_names());
    assert!(plan.step_names()[0].contains("qd8"), "{:?}", plan.step_names());
    let add = dynamic_payload(false, 1);
    let e = rbuild_kernels::xnnpack::compile_payload(&add, &none, limit).err().expect("an Add of qdint8 values must be refused");
    assert!(e.contains("Add") && e.contains("only FullyConnected, Conv2d and ConvTranspose2d take qdint8"), "{e}");
    let two = dynamic_payload(true, 2);
    let e = rbuild_kernels::xnnpack::compile_payload(&two, &none, limit).err().expect("num_nonbatch_dims 2 must be refused");
    assert!(e.contains("num_nonbatch_dims"), "{e}");
}
