//! The Ethos-U flow on MobileNetV2 int8: partition the fused graph, lower the subgraph through
//! Vela (ethos-u55-128), call it as an `EthosUBackend` delegate, emit and load the program.
//! Vela steps print `SKIPPED` and pass when Vela is missing (`bash tool/ci/setup.sh` installs it).

use std::path::{Path, PathBuf};

use rbuild_ethosu::partition::{self, Target};
use rbuild_ethosu::vela::{Vela, VelaOptions};
use rbuild_export::passes::{self, calibrate, to_out};
use rbuild_export::{emit, plan, Graph};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mobilenet_int8() -> (Graph, std::collections::BTreeMap<usize, rbuild_export::passes::fuse_int8::Matched>) {
    let w = rbuild_models::random_weights("mobilenet_v2", 1).unwrap();
    let mut g = rbuild_models::build("mobilenet_v2", &w, &[1, 3, 224, 224]).unwrap();
    let samples = calibrate::random_samples(&g, 2, 7).unwrap();
    let (_, matches) = passes::optimize_int8_for_delegation(&mut g, &samples).unwrap();
    (g, matches)
}

#[test]
fn mobilenet_v2_int8_is_one_npu_subgraph() {
    let (g, matches) = mobilenet_int8();
    let parts = partition::partition(&g, &matches);
    let cpu: Vec<_> = parts.cpu_ops();
    assert!(cpu.is_empty(), "{cpu:#?}");
    assert_eq!(parts.partitions.len(), 1);
    let boundary: Vec<&str> = parts.ops.iter().filter(|o| matches!(o.target, Target::Boundary(_))).map(|o| o.op.as_str()).collect();
    assert_eq!(boundary, ["quantized_decomposed::quantize_per_tensor", "quantized_decomposed::dequantize_per_tensor"]);
    // 52 convolutions, 10 residual adds, the mean, the reshape, the classifier.
    assert_eq!(parts.npu_ops(), 65);
    let p = &parts.partitions[0];
    assert_eq!((p.inputs.len(), p.outputs.len()), (1, 1));
    let sub = partition::subgraph(&g, &matches, p).unwrap();
    let pads = sub.ops.iter().filter(|o| o.kind.name() == "PAD").count();
    // The four stride-2 3x3 depthwise convolutions and the stem pad both sides (PyTorch), which TFLite's SAME does not.
    assert_eq!(pads, 5, "{:?}", sub.ops.iter().map(|o| o.kind.name()).collect::<Vec<_>>());
}

#[test]
fn mobilenet_v2_int8_delegated_program() {
    let Ok(vela) = Vela::locate(&[&repo_root()]) else {
        println!("SKIPPED: Vela not found");
        return;
    };
    let (mut g, matches) = mobilenet_int8();
    let parts = partition::partition(&g, &matches);
    let sub = partition::subgraph(&g, &matches, &parts.partitions[0]).unwrap();
    let opts = VelaOptions::for_accelerator("ethos-u55-128").unwrap();
    let lowered = rbuild_ethosu::lower::lower(&sub, &vela, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lowered.summary.cpu_operators, Some(0), "{:?}", lowered.summary.fields);
    println!("Vela: {:?}", lowered.summary.fields);
    partition::delegate(&mut g, &parts, vec![lowered.blob.clone()], "EthosUBackend").unwrap();
    to_out::to_out_variants(&mut g).unwrap();
    let ops = g.ops();
    println!("CPU ops of the delegated program: {ops:?}");
    let mem = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &mem, "forward").unwrap();
    let program = rbuild_runtime::Program::load(&bytes).unwrap();
    let kernels = rbuild_kernels::registry();
    let err = program
        .load_method("forward", &kernels, &rbuild_runtime::backend::BackendRegistry::new())
        .err()
        .expect("no EthosUBackend registered: load must fail");
    assert!(err.to_string().contains("EthosUBackend"), "{err}");
}

/// MobileNetV3-small: hardswish lookups and squeeze-excite muls stay on the CPU, which splits
/// the network into several NPU subgraphs; each must still compile fully for the NPU, and the
/// delegated program must keep every CPU op it needs.
#[test]
fn mobilenet_v3_small_splits_around_cpu_ops() {
    let w = rbuild_models::random_weights("mobilenet_v3_small", 1).unwrap();
    let mut g = rbuild_models::build("mobilenet_v3_small", &w, &[1, 3, 64, 64]).unwrap();
    let samples = calibrate::random_samples(&g, 2, 7).unwrap();
    let (_, matches) = passes::optimize_int8_for_delegation(&mut g, &samples).unwrap();
    let parts = partition::partition(&g, &matches);
    let cpu = parts.cpu_ops();
    assert!(cpu.iter().any(|o| o.op == "rbuild::qlookup" && matches!(&o.target, Target::Cpu(r) if r.contains("hardswish"))), "{cpu:#?}");
    assert!(cpu.iter().any(|o| o.op == "rbuild::qmul"), "{cpu:#?}");
    assert!(parts.partitions.len() > 2, "{} subgraphs", parts.partitions.len());
    // No subgraph reads a value a later CPU op produces (runs never swallow a CPU op's consumer).
    for p in &parts.partitions {
        let first = p.nodes[0];
        let producers = g.producers();
        for &v in &p.inputs {
            assert!(producers[v].is_none_or(|i| i < first || !p.nodes.contains(&i)), "input {v} of {p:?}");
        }
    }
    let Ok(vela) = Vela::locate(&[&repo_root()]) else {
        println!("SKIPPED: Vela not found");
        return;
    };
    let opts = VelaOptions::for_accelerator("ethos-u55-128").unwrap();
    let mut blobs = Vec::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        let sub = partition::subgraph(&g, &matches, p).unwrap_or_else(|e| panic!("subgraph {k}: {e}"));
        let lowered = rbuild_ethosu::lower::lower(&sub, &vela, &opts).unwrap_or_else(|e| panic!("subgraph {k}: {e}"));
        assert_eq!(lowered.summary.cpu_operators, Some(0), "subgraph {k}");
        blobs.push(lowered.blob);
    }
    let n = blobs.len();
    partition::delegate(&mut g, &parts, blobs, "EthosUBackend").unwrap();
    assert_eq!(g.nodes.iter().filter(|n| n.op == rbuild_export::graph::DELEGATE_CALL).count(), n);
    assert!(g.nodes.iter().any(|n| n.op == "rbuild::qlookup"), "CPU ops stay in the program");
    to_out::to_out_variants(&mut g).unwrap();
    let mem = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &mem, "forward").unwrap();
    rbuild_runtime::Program::load(&bytes).unwrap();
}
