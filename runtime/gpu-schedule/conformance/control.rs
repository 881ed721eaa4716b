//! `if_zero` (host-known flag: skipped on the host; device-computed flag: gated on the device
//! with indirect dispatches) and `positions`, against the CPU reference over several calls.

use super::common::*;
use rbuild_runtime::backends::gpu::payload::*;

/// The reference test's payload; with `device_flag` the flag is `pos * 1` computed by a kernel,
/// so the host cannot know it.
fn guarded(device_flag: bool) -> B {
    let mut b = B::default();
    let s = b.sym("s", 1, 5);
    let x = b.input("x", DType::F32, &fx(&[3]));
    let pos = b.input("pos", DType::I64, &fx(&[1]));
    let tokens = b.input("tokens", DType::I64, &[s]);
    let cache = b.value("cache", DType::F32, &fx(&[3]), ValueKind::State { init: StateInit::Zeros });
    let flag = if device_flag {
        let one = b.constant("one", DType::I64, &[1], 1i64.to_le_bytes().to_vec());
        b.op(Op::Binary(BinaryOp::Mul), &[pos, one], "flag", DType::I64, &fx(&[1]))
    } else {
        pos
    };
    b.op0(Op::IfZero { count: 3 }, &[flag]);
    let zero = b.constant("zero", DType::I64, &[1], 0i64.to_le_bytes().to_vec());
    let e = b.op(Op::Unary(UnaryOp::Neg), &[x], "e", DType::F32, &fx(&[3]));
    let e2 = b.op(Op::Binary(BinaryOp::Mul), &[e, x], "e2", DType::F32, &fx(&[3]));
    b.op0(Op::CacheUpdate { seq_dim: 0 }, &[cache, e2, zero]);
    let y = b.op(Op::Binary(BinaryOp::Add), &[cache, x], "y", DType::F32, &fx(&[3]));
    let ids = b.op(Op::Positions, &[pos], "ids", DType::I64, &[s]);
    let sum = b.op(Op::Binary(BinaryOp::Add), &[ids, tokens], "sum", DType::I64, &[s]);
    b.out(y);
    b.out(sum);
    b
}

#[test]
fn if_zero_and_positions_match_the_reference() {
    let ints = |v: &[i64]| HostTensor::i64(&[v.len()], v.to_vec());
    let calls = vec![
        vec![HostTensor::f32(&[3], vec![1.0, 2.0, 3.0]), ints(&[0]), ints(&[10, 20])],
        vec![HostTensor::f32(&[3], vec![5.0, 5.0, 5.0]), ints(&[4]), ints(&[1, 1, 1])],
        vec![HostTensor::f32(&[3], vec![-1.0, 0.5, 2.0]), ints(&[2]), ints(&[3])],
        vec![HostTensor::f32(&[3], vec![7.0, 8.0, 9.0]), ints(&[0]), ints(&[1, 2, 3, 4, 5])],
        vec![HostTensor::f32(&[3], vec![0.0, 0.0, 0.0]), ints(&[1]), ints(&[0])],
    ];
    for device_flag in [false, true] {
        if !check_calls(&guarded(device_flag), &calls, 0.0, &format!("if_zero (device flag: {device_flag})")) {
            return;
        }
    }
}

#[test]
fn negative_position_in_positions_is_an_error() {
    let Some(gpu) = gpu() else { return };
    let mut p = guarded(true).program(&gpu).unwrap();
    let err = p.run(&[HostTensor::f32(&[3], vec![0.0; 3]), HostTensor::i64(&[1], vec![-1]), HostTensor::i64(&[1], vec![0])]).unwrap_err();
    assert!(err.contains("(`positions`)") && err.contains("negative"), "{err}");
}
