//! TFLite writer, graph validation, npz reader, blob conversion and summary parsing (no Vela).

use std::collections::BTreeMap;

use rbuild_ethosu::graph::{Activation, Int8Graph, OpKind};
use rbuild_ethosu::lower::blob_from_raw;
use rbuild_ethosu::npz::{self, parse_npy};
use rbuild_ethosu::testnet::{conv_dw_add_pool_fc, Pooling};
use rbuild_ethosu::tflite;
use rbuild_ethosu::vela::{RawIo, RawOutput, Summary};

#[test]
fn tflite_header_and_buffers() {
    let g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::Mean);
    let b = tflite::write(&g).unwrap();
    assert_eq!(&b[4..8], b"TFL3");
    // Every constant's bytes appear 16-aligned in the file.
    for t in g.tensors.iter().filter(|t| t.data.as_ref().is_some_and(|d| d.len() >= 16 && d.iter().any(|&x| x != d[0]))) {
        let d = t.data.as_ref().unwrap();
        let at = b.windows(d.len()).position(|w| w == &d[..]).unwrap_or_else(|| panic!("{} missing", t.name));
        assert_eq!(at % 16, 0, "{}", t.name);
    }
}

#[test]
fn validation_names_the_problem() {
    let mut g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::AveragePool);
    g.ops[0].inputs.swap(1, 2);
    let e = tflite::write(&g).unwrap_err().to_string();
    assert!(e.contains("op 0 CONV_2D") && e.contains("weight"), "{e}");

    let mut g = Int8Graph::default();
    let a = g.activation("a", &[1, 4], 0.1, 0);
    let b = g.activation("b", &[1, 4], 0.1, 0);
    let c = g.activation("c", &[1, 4], 0.1, 0);
    g.op(OpKind::Add { act: Activation::None }, &[a, b], &[c]);
    g.inputs = vec![a];
    g.outputs = vec![c];
    let e = g.validate().unwrap_err().to_string();
    assert!(e.contains("`b` is used before"), "{e}");

    let mut g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::AveragePool);
    g.tensors[1].quant.scale.pop();
    g.tensors[1].quant.zero_point.pop();
    let e = g.validate().unwrap_err().to_string();
    assert!(e.contains("conv.weight") && e.contains("per-channel"), "{e}");
}

fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_s = if shape.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    v.extend_from_slice(data);
    v
}

/// A stored ZIP with ZIP64 extras, as Python's zipfile writes with force_zip64.
fn zip(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let off = out.len() as u64;
        let n = format!("{name}.npy");
        let mut extra = vec![1u8, 0, 16, 0];
        extra.extend_from_slice(&(data.len() as u64).to_le_bytes());
        extra.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&[45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        out.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(&extra);
        out.extend_from_slice(data);
        let mut cx = vec![1u8, 0, 24, 0];
        cx.extend_from_slice(&(data.len() as u64).to_le_bytes());
        cx.extend_from_slice(&(data.len() as u64).to_le_bytes());
        cx.extend_from_slice(&off.to_le_bytes());
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&[45, 3, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        central.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        central.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        central.extend_from_slice(&(n.len() as u16).to_le_bytes());
        central.extend_from_slice(&(cx.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 10]);
        central.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        central.extend_from_slice(n.as_bytes());
        central.extend_from_slice(&cx);
    }
    let cd = out.len();
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&(cd as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn npz_raw_output_to_blob() {
    let arrays = vec![
        ("cmd_data", npy("|u1", &[8], &[1, 2, 3, 4, 5, 6, 7, 8])),
        ("weight_data", npy("|u1", &[3], &[9, 9, 9])),
        ("weight_region", npy("<i8", &[], &i64s(&[0]))),
        ("scratch_size", npy("<i8", &[], &i64s(&[1024]))),
        ("scratch_region", npy("<i8", &[], &i64s(&[1]))),
        ("scratch_fast_size", npy("<i8", &[], &i64s(&[0]))),
        ("scratch_fast_region", npy("<i8", &[], &i64s(&[2]))),
        ("input_shape", npy("<i8", &[1, 4], &i64s(&[1, 8, 8, 3]))),
        ("input_elem_size", npy("<i8", &[1], &i64s(&[1]))),
        ("input_offset", npy("<i8", &[1], &i64s(&[0]))),
        ("input_region", npy("<i8", &[1], &i64s(&[1]))),
        ("output_shape", npy("<i8", &[1, 2], &i64s(&[1, 10]))),
        ("output_elem_size", npy("<i8", &[1], &i64s(&[1]))),
        ("output_offset", npy("<i8", &[1], &i64s(&[512]))),
        ("output_region", npy("<i8", &[1], &i64s(&[1]))),
    ];
    let z = zip(&arrays.iter().map(|(n, d)| (*n, d.clone())).collect::<Vec<_>>());
    let a = npz::parse(&z).unwrap();
    let raw = RawOutput::from_arrays(&a).unwrap();
    assert_eq!(raw.cmd_data, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(raw.inputs, vec![RawIo { shape: vec![1, 8, 8, 3], elem_size: 1, offset: 0, region: 1 }]);
    let b = blob_from_raw(&raw).unwrap();
    assert_eq!(b.inputs[0].shape, [1, 1, 1, 8, 8, 3]);
    assert_eq!(b.outputs[0].shape, [1, 1, 1, 1, 1, 10]);
    assert_eq!(b.outputs[0].offset, 512);

    let mut bad = raw.clone();
    bad.weight_region = 3;
    assert!(blob_from_raw(&bad).unwrap_err().contains("weight_region"));

    // Missing array: named.
    let mut a2: BTreeMap<_, _> = a.clone();
    a2.remove("scratch_size");
    assert!(RawOutput::from_arrays(&a2).unwrap_err().contains("scratch_size"));
    // Not a zip / truncated.
    assert!(npz::parse(b"hello").is_err());
    for n in [0, 10, z.len() / 2, z.len() - 1] {
        let _ = npz::parse(&z[..n]);
    }
    assert!(parse_npy("x", b"\x93NUMPY\x09\x00").is_err());
}

#[test]
fn summary_lines() {
    let text = "\nNetwork summary for network\nAccelerator configuration               Ethos_U55_128\nTotal SRAM used                                 21.50 KiB\nTotal Off-chip Flash used                        3.25 KiB\n\nCPU operators = 0 (0.0%)\nNPU operators = 6 (100.0%)\n\nNPU cycles                                      12345 cycles/batch\nBatch Inference time                 0.02 ms, 40000.00 inferences/s (batch size 1)\n";
    let s = Summary::parse(text, None);
    assert_eq!(s.cpu_operators, Some(0));
    assert_eq!(s.npu_operators, Some(6));
    assert_eq!(s.npu_cycles, Some(12345));
    assert_eq!(s.sram_used_kib, Some(21.5));
    assert_eq!(s.offchip_used_kib, Some(3.25));
    assert_eq!(s.inference_time_ms, Some(0.02));
    assert!(s.fields.iter().any(|(k, v)| k == "Accelerator configuration" && v == "Ethos_U55_128"));
    let s = Summary::parse("Total   SRAM bandwidth            per input      0.04 MB/inference (batch size 1)\n", None);
    assert_eq!(s.fields, vec![("Total SRAM bandwidth per input".to_string(), "0.04 MB/inference (batch size 1)".to_string())]);
    // Vela 5.2 puts cycles in its summary CSV.
    let csv = "experiment,network,sram_memory_used,off_chip_flash_memory_used,dram_memory_used,inference_time,cycles_npu,cycles_total\ndefault,network,8.328125,2.15625,0.0,3.6072e-05,17841,18036\n";
    let s = Summary::parse("CPU operators = 0 (0.0%)\n", Some(csv));
    assert_eq!(s.npu_cycles, Some(17841));
    assert_eq!(s.total_cycles, Some(18036));
    assert_eq!(s.sram_used_kib, Some(8.328125));
    assert_eq!(s.offchip_used_kib, Some(2.15625));
    assert!((s.inference_time_ms.unwrap() - 0.036072).abs() < 1e-9);
    assert_eq!(s.cpu_operators, Some(0));
}

#[test]
fn cpu_operator_warnings() {
    let log = "Warning (supported operators) operator: MEAN, ofm: 'mean.out'\nReason: Unsupported depth-reduction.  IFM: 1, 4, 4, 1024\nReduction over depth is only supported if any of h,w,c == 1\n\nWarning (supported operators) operator: CONV_2D, ofm: 'c'\nReason: Stride too large\nTraceback (most recent call last):\n";
    let ops = rbuild_ethosu::vela::parse_cpu_ops(log);
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0].op, "MEAN");
    assert_eq!(ops[0].ofm, "mean.out");
    assert_eq!(
        ops[0].reasons,
        vec!["Unsupported depth-reduction.  IFM: 1, 4, 4, 1024", "Reduction over depth is only supported if any of h,w,c == 1"]
    );
    assert_eq!(ops[1].reasons, vec!["Stride too large"]);
}
