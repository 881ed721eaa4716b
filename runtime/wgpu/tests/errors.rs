//! Init and run errors (each names the op, value, key or symbol; nothing panics), device-side
//! error flags, known values, and adapter listing.

mod dut;
#[path = "../../gpu-schedule/conformance/common.rs"]
mod common;

use common::*;
use rbuild_gpu_wgpu::{list_adapters, DeviceChoice, GpuDevice};
use rbuild_runtime::backends::gpu::payload::*;

fn add_payload() -> B {
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[2]));
    let c = b.cf("c", DType::F32, &[2], &[3.0, 4.0]);
    let y = b.op(Op::Binary(BinaryOp::Add), &[x, c], "y", DType::F32, &fx(&[2]));
    b.out(y);
    b
}

#[test]
fn known_values() {
    let Some(gpu) = gpu() else { return };
    let mut p = add_payload().program(&gpu).unwrap();
    let out = p.run(&[HostTensor::f32(&[2], vec![1.0, 2.0])]).unwrap();
    assert_eq!(out[0].data, HostData::F32(vec![4.0, 6.0]));
}

#[test]
fn init_errors_name_the_value_and_key() {
    let Some(gpu) = gpu() else { return };
    let mut b = add_payload();
    b.named.clear();
    let err = b.program(&gpu).err().unwrap();
    assert!(err.contains("value 1 `c`") && err.contains("named_data key `c`"), "{err}");
    b.named.insert("c".into(), vec![0; 7]);
    let err = b.program(&gpu).err().unwrap();
    assert!(err.contains("`c`") && err.contains("7 bytes") && err.contains("needs 8"), "{err}");

    // Quantized constants go only into `linear` weights and `embedding` tables: anywhere else
    // the error names the op and dtype.
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[1, 4]));
    let w = quantized(&mut b, "w", DType::QInt8Grouped, 4, 2, 4, &mut Rng(1));
    let y = b.op(Op::MatMul, &[x, w], "y", DType::F32, &fx(&[1, 2]));
    b.out(y);
    let err = b.program(&gpu).err().unwrap();
    assert!(err.contains("op 0 (`matmul`)") && err.contains("qint8_grouped"), "{err}");
    // A wrong byte count names the value and key.
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[1, 4]));
    let w = quantized(&mut b, "w", DType::QInt4Grouped, 2, 4, 4, &mut Rng(1));
    let y = b.op(Op::Linear { weight_transposed: false }, &[x, w], "y", DType::F32, &fx(&[1, 2]));
    b.out(y);
    assert!(b.program(&gpu).is_ok());
    b.named.insert("w".into(), vec![0; 3]);
    let err = b.program(&gpu).err().unwrap();
    assert!(err.contains("`w`") && err.contains("3 bytes"), "{err}");
}

#[test]
fn run_errors_match_the_reference_contract() {
    let Some(gpu) = gpu() else { return };
    let b = add_payload();
    let mut p = b.program(&gpu).unwrap();
    let err = p.run(&[]).unwrap_err();
    assert!(err.contains("takes 1 input(s), got 0"), "{err}");
    let err = p.run(&[HostTensor::i64(&[2], vec![1, 2])]).unwrap_err();
    assert!(err.contains("delegate input 0") && err.contains("is f32, got i64"), "{err}");
    let err = p.run(&[HostTensor::f32(&[3], vec![1.0, 2.0, 3.0])]).unwrap_err();
    assert!(err.contains("dim 0 is 2"), "{err}");
    // Shape disagreement found while planning names the op.
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[2, 3]));
    let w = b.input("w", DType::F32, &fx(&[4, 5]));
    let y = b.op(Op::MatMul, &[x, w], "y", DType::F32, &fx(&[2, 5]));
    b.out(y);
    let mut p = b.program(&gpu).unwrap();
    let err = p.run(&[HostTensor::f32(&[2, 3], vec![0.0; 6]), HostTensor::f32(&[4, 5], vec![0.0; 20])]).unwrap_err();
    assert!(err.contains("op 0 (`matmul`)") && err.contains("inner dims"), "{err}");
}

#[test]
fn device_side_index_errors_are_reported() {
    let Some(gpu) = gpu() else { return };
    let mut b = B::default();
    let t = b.cf("t", DType::F32, &[3, 2], &[0.0; 6]);
    let i = b.input("i", DType::I64, &fx(&[2]));
    let e = b.op(Op::Embedding, &[t, i], "e", DType::F32, &fx(&[2, 2]));
    b.out(e);
    let mut p = b.program(&gpu).unwrap();
    let err = p.run(&[HostTensor::i64(&[2], vec![0, 3])]).unwrap_err();
    assert!(err.contains("op 0 (`embedding`)") && err.contains("out of range"), "{err}");
    // i64 values that do not fit the device's i32 storage.
    let err = p.run(&[HostTensor::i64(&[2], vec![0, 1 << 40])]).unwrap_err();
    assert!(err.contains("does not fit in i32"), "{err}");
    assert!(p.run(&[HostTensor::i64(&[2], vec![2, 0])]).is_ok());
}

#[test]
fn adapters_are_listed_and_named_choice_works() {
    let Some(gpu) = gpu() else { return };
    let list = list_adapters().unwrap();
    assert!(!list.is_empty());
    eprintln!("adapters: {}", list.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("; "));
    let name = gpu.adapter().name.clone();
    let again = GpuDevice::new(&DeviceChoice::Named(name[..name.len().min(4)].to_uppercase())).unwrap();
    assert_eq!(again.adapter().name, name);
    let by_backend = GpuDevice::new(&DeviceChoice::Named(gpu.adapter().backend.to_lowercase())).unwrap();
    assert_eq!(by_backend.adapter().backend, gpu.adapter().backend);
    let err = GpuDevice::new(&DeviceChoice::Named("no-such-adapter-xyz".into())).unwrap_err();
    assert!(err.contains("no GPU adapter matches"), "{err}");
    assert_eq!(DeviceChoice::parse("cpu"), None);
    assert_eq!(DeviceChoice::parse("gpu"), Some(DeviceChoice::Gpu));
}
