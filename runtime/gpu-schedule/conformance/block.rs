//! A small transformer block (layer_norm → q/k/v linears → reshape → rope → cache_update ×2 →
//! attention with a position → output linear → residual add → gelu), run over three
//! consecutive calls with KV caches on the device, equals the CPU reference twin on every call;
//! and the same through the `Backend` / `KernelArgs` wrapper.

use std::cell::RefCell;

use super::common::*;
use rbuild_runtime::backend::{BackendInitContext, DelegateHandle};
use rbuild_runtime::backends::gpu::payload::*;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::ScalarType;

const D: usize = 24;
const H: usize = 4;
const HKV: usize = 2;
const HD: usize = D / H;
const CACHE: usize = 16;

/// The block with activations and caches of `dt`; input x `[1, L, D]` (L symbolic, 1..=8) and
/// an i64 position scalar.
fn block(dt: DType) -> B {
    let mut b = B::default();
    let mut rng = Rng(42);
    let l = b.sym("L", 1, 8);
    let x = b.input("x", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let pos = b.input("pos", DType::I64, &[]);
    let lnw = b.cf("ln.w", dt, &[D], &rng.vec(D));
    let lnb = b.cf("ln.b", dt, &[D], &rng.vec(D));
    let xn = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[x, lnw, lnb], "xn", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let kvd = HKV * HD;
    let wq = b.cf("wq", dt, &[D, D], &rng.vec(D * D));
    let wk = b.cf("wk", dt, &[kvd, D], &rng.vec(kvd * D));
    let wv = b.cf("wv", dt, &[D, kvd], &rng.vec(kvd * D));
    let bq = b.cf("bq", dt, &[D], &rng.vec(D));
    let q = b.op(Op::Linear { weight_transposed: false }, &[xn, wq, bq], "q", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let k = b.op(Op::Linear { weight_transposed: false }, &[xn, wk], "k", dt, &[Dim::Fixed(1), l, Dim::Fixed(kvd as u64)]);
    let v = b.op(Op::Linear { weight_transposed: true }, &[xn, wv], "v", dt, &[Dim::Fixed(1), l, Dim::Fixed(kvd as u64)]);
    let heads = |n: usize| [Dim::Fixed(1), l, Dim::Fixed(n as u64), Dim::Fixed(HD as u64)];
    let q4 = b.op(Op::Reshape, &[q], "q4", dt, &heads(H));
    let k4 = b.op(Op::Reshape, &[k], "k4", dt, &heads(HKV));
    let v4 = b.op(Op::Reshape, &[v], "v4", dt, &heads(HKV));
    let rope = Op::Rope { theta: 10000.0, head_dim: HD as u32, interleaved: false };
    let qr = b.op(rope.clone(), &[q4, pos], "qr", dt, &heads(H));
    let kr = b.op(rope, &[k4, pos], "kr", dt, &heads(HKV));
    let kc = b.state("k_cache", dt, &[1, CACHE, HKV, HD]);
    let vc = b.state("v_cache", dt, &[1, CACHE, HKV, HD]);
    b.op0(Op::CacheUpdate { seq_dim: 1 }, &[kc, kr, pos]);
    b.op0(Op::CacheUpdate { seq_dim: 1 }, &[vc, v4, pos]);
    let att = Op::Attention { causal: true, scale: 1.0 / (HD as f32).sqrt(), num_heads: H as u32, num_kv_heads: HKV as u32 };
    let a = b.op(att, &[qr, kc, vc, pos], "att", dt, &heads(H));
    let a3 = b.op(Op::Reshape, &[a], "att3", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let wo = b.cf("wo", dt, &[D, D], &rng.vec(D * D));
    let o = b.op(Op::Linear { weight_transposed: false }, &[a3, wo], "o", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let r = b.op(Op::Binary(BinaryOp::Add), &[x, o], "res", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    let g = b.op(Op::Gelu { approximation: GeluApproximation::Erf }, &[r], "y", dt, &[Dim::Fixed(1), l, Dim::Fixed(D as u64)]);
    b.out(g);
    b.out(a);
    b
}

fn calls(dt: DType) -> Vec<Vec<HostTensor>> {
    let mut rng = Rng(7);
    // Prefill 5 rows, then one decode step, then two rows.
    [(5usize, 0i64), (1, 5), (2, 6)].iter().map(|&(l, p)| vec![tensor(dt, &[1, l, D], rng.vec(l * D)), HostTensor::i64(&[], vec![p])]).collect()
}

#[test]
fn transformer_block_over_three_calls_matches_the_reference() {
    for dt in [DType::F32, DType::F16] {
        let tol = if dt == DType::F32 { 1e-4 } else { 1e-2 };
        if !check_calls(&block(dt), &calls(dt), tol, &format!("block {dt:?}")) {
            return;
        }
    }
}

/// After three calls the KV caches on the device hold exactly the reference's values (f16
/// caches: the same f16 values).
#[test]
fn kv_caches_equal_the_reference_state() {
    let Some(gpu) = gpu() else { return };
    for dt in [DType::F32, DType::F16] {
        let b = block(dt);
        let mut reference = b.reference().unwrap();
        let mut program = b.program(&gpu).unwrap();
        for inputs in calls(dt) {
            reference.run(&inputs).unwrap();
            program.run(&inputs).unwrap();
        }
        for name in ["k_cache", "v_cache"] {
            let id = b.p.values.iter().position(|v| v.name == name).unwrap() as ValueId;
            let got = program.read_state(id).unwrap();
            let want = reference.state(id).unwrap();
            close(&got, want, if dt == DType::F32 { 1e-4 } else { 1e-2 }, &format!("{name} {dt:?}"));
        }
        let err = program.read_state(0).unwrap_err();
        assert!(err.contains("not a state value"), "{err}");
    }
}

#[test]
fn activation_buffers_are_shared_by_liveness() {
    let Some(gpu) = gpu() else { return };
    let b = block(DType::F32);
    let program = b.program(&gpu).unwrap();
    // Without sharing: every non-alias activation at its max size.
    let p = b.payload();
    let unshared: u64 = p
        .ops
        .iter()
        .filter(|n| !matches!(n.op, Op::Reshape))
        .flat_map(|n| n.outputs.iter())
        .map(|&id| {
            let n: u64 = p.values[id as usize].meta.dims.iter().map(|d| match *d {
                Dim::Fixed(n) => n,
                Dim::Symbol(s) => p.symbols[s as usize].max,
            }).product();
            n * 4
        })
        .sum();
    assert!(program.activation_bytes() < unshared, "{} >= {unshared}", program.activation_bytes());
}

#[test]
fn position_past_the_cache_is_an_error_naming_the_op() {
    let Some(gpu) = gpu() else { return };
    let b = block(DType::F32);
    let mut program = b.program(&gpu).unwrap();
    let err = program.run(&[tensor(DType::F32, &[1, 2, D], vec![0.0; 2 * D]), HostTensor::i64(&[], vec![15])]).unwrap_err();
    assert!(err.contains("(`cache_update`)") && err.contains("exceeds cache"), "{err}");
    let err = program.run(&[tensor(DType::F32, &[1, 9, D], vec![0.0; 9 * D]), HostTensor::i64(&[], vec![0])]).unwrap_err();
    assert!(err.contains("symbol `L`") && err.contains("outside its bounds"), "{err}");
    // The program still works after errors.
    let mut reference = b.reference().unwrap();
    let inputs = vec![tensor(DType::F32, &[1, 1, D], vec![0.5; D]), HostTensor::i64(&[], vec![0])];
    let want = reference.run(&inputs).unwrap();
    let got = program.run(&inputs).unwrap();
    close(&got[0], &want[0], 1e-4, "after errors");
}

thread_local! {
    static HANDLE: RefCell<Option<Box<dyn DelegateHandle>>> = RefCell::new(None);
}

fn call_handle(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    HANDLE.with(|h| match h.borrow_mut().as_mut() {
        Some(handle) => handle.execute(ctx, args),
        None => Err(rbuild_runtime::kernel::KernelError::new("no handle")),
    })
}

#[test]
fn backend_runs_the_block_through_kernel_args_with_persistent_state() {
    let Some(gpu) = gpu() else { return };
    let backend = crate::dut::backend(gpu);
    assert_eq!(backend.id(), RBUILD_GPU_BACKEND_ID);
    let b = block(DType::F32);
    let blob = b.p.to_bytes().unwrap();
    let named = |k: &str| b.named.get(k).map(|v| v.as_slice());
    let ctx = BackendInitContext { named_data: &named };
    let handle = backend.init(&ctx, &blob, &[]).unwrap_or_else(|e| panic!("{e}"));
    HANDLE.with(|h| *h.borrow_mut() = Some(handle));
    let mut reference = b.reference().unwrap();
    for inputs in calls(DType::F32) {
        let want = reference.run(&inputs).unwrap();
        let l = inputs[0].dims[1];
        let mut hn = OpHarness::new();
        let x = hn.f32(&[1, l, D], inputs[0].as_f32().unwrap());
        let pos = hn.i64(&[], &[match &inputs[1].data {
            HostData::I64(v) => v[0],
            _ => unreachable!(),
        }]);
        let y = hn.out_dynamic(ScalarType::Float, &[1, 8, D]);
        let a = hn.out_dynamic(ScalarType::Float, &[1, 8, H, HD]);
        hn.call(call_handle, &[x, pos, y, a]).unwrap();
        assert_eq!(hn.sizes(y), vec![1, l, D]);
        let got = tensor(DType::F32, &[1, l, D], hn.read::<f32>(y));
        close(&got, &want[0], 1e-4, "backend output");
    }
    let mut hn = OpHarness::new();
    let x = hn.f32(&[1, 9, D], &[0.0; 9 * D]);
    let pos = hn.i64(&[], &[0]);
    let y = hn.out_dynamic(ScalarType::Float, &[1, 8, D]);
    let a = hn.out_dynamic(ScalarType::Float, &[1, 8, H, HD]);
    let err = hn.call(call_handle, &[x, pos, y, a]).unwrap_err();
    assert!(err.message.contains(RBUILD_GPU_BACKEND_ID) && err.message.contains("outside its bounds"), "{}", err.message);
    let err = hn.call(call_handle, &[x, pos]).unwrap_err();
    assert!(err.message.contains("2 arguments"), "{}", err.message);
    HANDLE.with(|h| *h.borrow_mut() = None);

    let err = backend.init(&ctx, &blob[..10], &[]).err().unwrap();
    assert!(err.contains(RBUILD_GPU_BACKEND_ID), "{err}");
    let empty = |_: &str| -> Option<&[u8]> { None };
    let err = backend.init(&BackendInitContext { named_data: &empty }, &blob, &[]).err().unwrap();
    assert!(err.contains("named_data key `ln.w`"), "{err}");
}

/// Mutated blocks (an activation's dim or dtype, an op attribute): the GPU program never panics,
/// and agrees with the reference on which mutations are errors and, when both run, on the
/// outputs.
#[test]
fn mutated_blocks_error_without_panicking_and_agree_with_the_reference() {
    let Some(gpu) = gpu() else { return };
    let base = block(DType::F32);
    let mut r = Rng(99);
    let mut pick = |n: usize| ((r.next() + 1.0) * 0.5 * n as f32) as usize % n.max(1);
    let dtypes = [DType::F32, DType::F16, DType::I64, DType::Bool, DType::I32, DType::BF16];
    let (mut errors, mut mismatched) = (0, Vec::new());
    for round in 0..200 {
        let mut b = B { p: base.p.clone(), named: base.named.clone() };
        let acts: Vec<usize> = (0..b.p.values.len()).filter(|&i| matches!(b.p.values[i].kind, ValueKind::Activation)).collect();
        for _ in 0..1 + pick(2) {
            let v = acts[pick(acts.len())];
            match pick(3) {
                0 => {
                    let rank = b.p.values[v].meta.dims.len();
                    if rank > 0 {
                        let d = pick(rank);
                        b.p.values[v].meta.dims[d] = Dim::Fixed(pick(30) as u64);
                    }
                }
                1 => b.p.values[v].meta.dtype = dtypes[pick(dtypes.len())],
                _ => {
                    let o = pick(b.p.ops.len());
                    match &mut b.p.ops[o].op {
                        Op::Attention { causal, .. } => *causal = !*causal,
                        Op::Rope { head_dim, interleaved, .. } => {
                            *head_dim = 1 + pick(8) as u32;
                            *interleaved = !*interleaved;
                        }
                        Op::CacheUpdate { seq_dim } => *seq_dim = pick(4) as i64 - 4,
                        Op::Linear { weight_transposed } => *weight_transposed = !*weight_transposed,
                        _ => {}
                    }
                }
            }
        }
        if b.p.validate().is_err() {
            continue;
        }
        let inputs = calls(DType::F32);
        let gpu_result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<Vec<Vec<HostTensor>>, String> {
            let mut p = b.program(&gpu)?;
            inputs.iter().map(|i| p.run(i)).collect()
        }));
        let Ok(got) = gpu_result else {
            panic!("round {round}: panicked on a mutated block: {:?}", b.p.ops.iter().map(|o| &o.op).collect::<Vec<_>>());
        };
        let want: Result<Vec<Vec<HostTensor>>, String> = (|| {
            let mut it = b.reference()?;
            inputs.iter().map(|i| it.run(i)).collect()
        })();
        match (got, want) {
            (Ok(g), Ok(w)) => {
                for (c, (g, w)) in g.iter().zip(&w).enumerate() {
                    for (o, (g, w)) in g.iter().zip(w).enumerate() {
                        close(g, w, 1e-3, &format!("round {round} call {c} output {o}"));
                    }
                }
            }
            (Err(e), Err(_)) => {
                assert!(e.starts_with("op ") || e.contains("value") || e.contains("delegate"), "round {round}: {e}");
                errors += 1;
            }
            (g, w) => mismatched.push(format!("round {round}: gpu {:?} / reference {:?}", g.err(), w.err())),
        }
    }
    assert!(mismatched.is_empty(), "{} disagreement(s):\n{}", mismatched.len(), mismatched.join("\n"));
    assert!(errors > 30, "only {errors} mutations were rejected");
}

/// f16 in and out, plus an i32 output, through `KernelArgs`: the backend's byte encodings.
#[test]
fn backend_f16_and_integer_io() {
    let Some(gpu) = gpu() else { return };
    let mut b = B::default();
    let x = b.input("x", DType::F16, &fx(&[5]));
    let pos = b.input("pos", DType::I32, &[]);
    let y = b.op(Op::Unary(UnaryOp::Neg), &[x], "y", DType::F16, &fx(&[5]));
    let ids = b.op(Op::Positions, &[pos], "ids", DType::I32, &fx(&[3]));
    b.out(y);
    b.out(ids);
    let blob = b.p.to_bytes().unwrap();
    let named = |k: &str| b.named.get(k).map(|v| v.as_slice());
    let backend = crate::dut::backend(gpu);
    let handle = backend.init(&BackendInitContext { named_data: &named }, &blob, &[]).unwrap_or_else(|e| panic!("{e}"));
    HANDLE.with(|h| *h.borrow_mut() = Some(handle));
    let mut hn = OpHarness::new();
    let xs: Vec<half::f16> = [1.5f32, -2.0, 0.25, 65504.0, -0.0].iter().map(|&v| half::f16::from_f32(v)).collect();
    let xi = hn.tensor(ScalarType::Half, &[5], &xs);
    let pi = hn.tensor(ScalarType::Int, &[], &[7i32]);
    let yo = hn.out(ScalarType::Half, &[5]);
    let io = hn.out(ScalarType::Int, &[3]);
    hn.call(call_handle, &[xi, pi, yo, io]).unwrap();
    let want: Vec<half::f16> = xs.iter().map(|v| -*v).collect();
    assert_eq!(hn.read::<half::f16>(yo), want);
    assert_eq!(hn.read::<i32>(io), vec![7, 8, 9]);
    // The program's output dtype must be the payload's.
    let wrong = hn.out(ScalarType::Float, &[5]);
    let err = hn.call(call_handle, &[xi, pi, wrong, io]).unwrap_err();
    assert!(err.message.contains("output 0") && err.message.contains("f32") && err.message.contains("f16"), "{}", err.message);
    HANDLE.with(|h| *h.borrow_mut() = None);
}

/// With profiling on, every dispatch of a run gets a GPU time tagged with its op and shader, and
/// the results are unchanged.
#[test]
fn profiling_times_every_dispatch() {
    let Some(gpu) = gpu() else { return };
    let b = block(DType::F32);
    let mut program = b.program(&gpu).unwrap();
    if let Err(e) = program.set_profiling(true) {
        eprintln!("notice: {e}; skipping");
        return;
    }
    let mut reference = b.reference().unwrap();
    for inputs in calls(DType::F32) {
        let want = reference.run(&inputs).unwrap();
        let got = program.run(&inputs).unwrap();
        close(&got[0], &want[0], 1e-4, "profiled run");
        let profile = program.last_profile();
        // One dispatch per op except the reshapes (aliases).
        let expected = b.p.ops.iter().filter(|n| !matches!(n.op, Op::Reshape)).count();
        assert_eq!(profile.len(), expected, "{profile:?}");
        assert!(profile.iter().all(|t| t.nanos >= 0.0 && t.op < b.p.ops.len()));
        assert!(profile.iter().any(|t| t.op_name == "attention" && t.kernel == crate::dut::kernel_file(rbuild_gpu_schedule::Kernel::Attention)));
    }
    program.set_profiling(false).unwrap();
    program.run(&calls(DType::F32)[0]).unwrap();
    assert!(program.last_profile().is_empty());
}
