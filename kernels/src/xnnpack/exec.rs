//! Running a [`Plan`]: the call's inputs copied into their buffers, each step on its buffers,
//! the outputs copied out.

use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID as ID;
use rbuild_runtime::kernel::{KernelArgs, KernelResult};
use rbuild_runtime::{kerr, KernelError, ScalarType};

use super::compile::{Buf, Elem, Op, Plan, Step};
use super::ops;
use crate::nhwc::qs8;
use crate::nhwc::{Parallel, Serial};

/// The threads a delegate runs its operators on: a persistent pool (std builds) made for the
/// thread count of the first multi-threaded call, remade when that count changes.
#[derive(Default)]
pub struct Workers {
    #[cfg(feature = "std")]
    pool: Option<crate::nhwc::pool::ThreadPool>,
    #[cfg(feature = "std")]
    threads: usize,
}

impl Workers {
    fn get(&mut self, threads: usize) -> &dyn Parallel {
        #[cfg(feature = "std")]
        if threads > 1 {
            if self.pool.is_none() || self.threads != threads {
                self.pool = Some(crate::nhwc::pool::ThreadPool::new(threads));
                self.threads = threads;
            }
            if let Some(p) = &self.pool {
                return p;
            }
        }
        let _ = threads;
        &Serial
    }
}

fn scalar_type(e: Elem) -> ScalarType {
    match e {
        Elem::F32 => ScalarType::Float,
        Elem::I8 => ScalarType::Char,
        Elem::I32 => ScalarType::Int,
    }
}

pub fn execute(plan: &mut Plan, workers: &mut Workers, threads: usize, args: &KernelArgs<'_>) -> KernelResult {
    let (ni, no) = (plan.inputs.len(), plan.outputs.len());
    if args.len() != ni + no {
        return Err(kerr!("{ID}: delegate call has {} arguments, the payload takes {ni} inputs + {no} outputs", args.len()));
    }
    for (i, ext) in plan.inputs.iter().enumerate() {
        let t = args.tensor(i).map_err(|e| kerr!("{ID}: input {i}: {e}"))?;
        let want = scalar_type(ext.elem);
        let numel: usize = ext.dims.iter().product();
        if t.dtype != want || t.numel() != numel {
            return Err(kerr!("{ID}: input {i} is {} {:?}, the payload expects {want} {:?}", t.dtype, t.sizes(), ext.dims));
        }
        if !t.dim_order.is_contiguous() {
            return Err(kerr!("{ID}: input {i}: dim order {:?} is not supported (contiguous only)", t.dim_order));
        }
        match &mut plan.bufs[ext.buf] {
            Buf::F32(v) => v[..numel].copy_from_slice(t.data::<f32>()?),
            Buf::I8(v) => v[..numel].copy_from_slice(t.data::<i8>()?),
            Buf::I32(v) => v[..numel].copy_from_slice(t.data::<i32>()?),
        }
    }
    run_steps(plan, workers, threads)?;
    for (j, ext) in plan.outputs.iter().enumerate() {
        let mut t = args.out(ni + j).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        let want = scalar_type(ext.elem);
        if t.dtype != want {
            return Err(kerr!("{ID}: output {j}: the program's tensor is {}, the payload's value is {want}", t.dtype));
        }
        let numel: usize = ext.dims.iter().product();
        if t.numel() != numel {
            t.resize(&ext.dims).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        }
        match &plan.bufs[ext.buf] {
            Buf::F32(v) => t.data_mut::<f32>()?.copy_from_slice(&v[..numel]),
            Buf::I8(v) => t.data_mut::<i8>()?.copy_from_slice(&v[..numel]),
            Buf::I32(v) => t.data_mut::<i32>()?.copy_from_slice(&v[..numel]),
        }
    }
    Ok(())
}

/// Every step of the plan in order.
pub fn run_steps(plan: &mut Plan, workers: &mut Workers, threads: usize) -> KernelResult {
    let par = workers.get(threads);
    for (k, step) in plan.steps.iter().enumerate() {
        run_step(par, &mut plan.bufs, step).map_err(|e| kerr!("{ID}: step {k} ({}): {}", step.kind.name(), e.message))?;
    }
    Ok(())
}

fn f32s(b: &Buf, n: usize) -> KernelResult<&[f32]> {
    match b {
        Buf::F32(v) => v.get(..n).ok_or_else(|| kerr!("buffer shorter than {n}")),
        _ => Err(kerr!("expected an f32 buffer")),
    }
}

fn i8s(b: &Buf, n: usize) -> KernelResult<&[i8]> {
    match b {
        Buf::I8(v) => v.get(..n).ok_or_else(|| kerr!("buffer shorter than {n}")),
        _ => Err(kerr!("expected an int8 buffer")),
    }
}

fn msg(e: alloc::string::String) -> KernelError {
    kerr!("{e}")
}

/// Runs one step; the output buffer is taken out of `bufs` while its inputs are read.
fn run_step(par: &dyn Parallel, bufs: &mut [Buf], step: &Step) -> KernelResult {
    let (ob, on) = step.output;
    let mut out = core::mem::replace(&mut bufs[ob], Buf::F32(super::aligned::Aligned::empty()));
    let mut scratch: Vec<Buf> = step.scratch.iter().map(|&b| core::mem::replace(&mut bufs[b], Buf::F32(super::aligned::Aligned::empty()))).collect();
    let result = run_into(par, bufs, step, &mut out, on, &mut scratch);
    bufs[ob] = out;
    for (&b, buf) in step.scratch.iter().zip(scratch) {
        bufs[b] = buf;
    }
    result
}

fn run_into(par: &dyn Parallel, bufs: &[Buf], step: &Step, out: &mut Buf, on: usize, scratch: &mut [Buf]) -> KernelResult {
    let input = |k: usize| -> KernelResult<&Buf> {
        let (b, _) = step.inputs.get(k).ok_or_else(|| kerr!("missing input {k}"))?;
        Ok(&bufs[*b])
    };
    let len = |k: usize| step.inputs.get(k).map_or(0, |x| x.1);
    let in_f32 = |k: usize| f32s(input(k)?, len(k));
    let in_i8 = |k: usize| i8s(input(k)?, len(k));
    match (&step.op, out) {
        (Op::ConvF32 { op, min, max }, Buf::F32(y)) => op.run(par, in_f32(0)?, &mut y[..on], *min, *max).map_err(msg),
        (Op::DepthwiseF32 { op, min, max }, Buf::F32(y)) => op.run(par, in_f32(0)?, &mut y[..on], *min, *max).map_err(msg),
        (Op::ExpandDwF32 { expand, e_min, e_max, dw, min, max, project }, Buf::F32(y)) => match scratch {
            [Buf::F32(band)] if project.is_none() => {
                ops::expand_depthwise_f32(par, expand, (*e_min, *e_max), dw, (*min, *max), None, in_f32(0)?, band, &mut y[..on]).map_err(msg)
            }
            [Buf::F32(band), Buf::F32(band2)] => {
                let project = project.as_ref().map(|(p, lo, hi)| (p, *lo, *hi, &mut band2[..]));
                ops::expand_depthwise_f32(par, expand, (*e_min, *e_max), dw, (*min, *max), project, in_f32(0)?, band, &mut y[..on]).map_err(msg)
            }
            _ => Err(kerr!("fused expand/depthwise step without its f32 scratch buffers")),
        },
        (Op::FullyConnectedF32 { op, m, min, max }, Buf::F32(y)) => op.run(par, *m, in_f32(0)?, &mut y[..on], *min, *max).map_err(msg),
        (Op::ConvQs8(op), Buf::I8(y)) => op.run(par, in_i8(0)?, &mut y[..on]).map_err(msg),
        (Op::DepthwiseQs8(op), Buf::I8(y)) => op.run(par, in_i8(0)?, &mut y[..on]).map_err(msg),
        (Op::FullyConnectedQs8 { op, m }, Buf::I8(y)) => op.run(par, *m, in_i8(0)?, &mut y[..on]).map_err(msg),
        (Op::FullyConnectedQd8 { op, m, min, max }, Buf::F32(y)) => op.run(par, in_f32(0)?, *m, &mut y[..on], *min, *max).map_err(msg),
        (Op::DeconvF32 { geom, filter, bias, min, max, .. }, Buf::F32(y)) => {
            ops::deconv_f32(geom, filter, bias.as_deref(), in_f32(0)?, &mut y[..on], *min, *max);
            Ok(())
        }
        (Op::BinaryF32 { op, bc, min, max }, Buf::F32(y)) => {
            ops::binary_f32(*op, bc, in_f32(0)?, in_f32(1)?, &mut y[..on], *min, *max);
            Ok(())
        }
        (Op::AddQs8 { op, bc }, Buf::I8(y)) => qs8_binary(op, bc, in_i8(0)?, in_i8(1)?, &mut y[..on]),
        (Op::MulQs8 { op, bc }, Buf::I8(y)) => qs8_binary(op, bc, in_i8(0)?, in_i8(1)?, &mut y[..on]),
        (Op::UnaryF32 { op, min, max }, Buf::F32(y)) => {
            ops::unary_f32(*op, in_f32(0)?, &mut y[..on], *min, *max);
            Ok(())
        }
        (Op::ClampI8 { lo, hi }, Buf::I8(y)) => {
            for (y, &x) in y[..on].iter_mut().zip(in_i8(0)?) {
                *y = x.clamp(*lo, *hi);
            }
            Ok(())
        }
        (Op::TableI8(table), Buf::I8(y)) => {
            let table: &[i8; 256] = table.as_slice().try_into().map_err(|_| kerr!("table of {} entries", table.len()))?;
            qs8::lookup_table(table, in_i8(0)?, &mut y[..on]).map_err(msg)
        }
        (Op::Quantize(q), Buf::I8(y)) => qs8::quantize_f32(in_f32(0)?, *q, &mut y[..on]).map_err(msg),
        (Op::Dequantize(q), Buf::F32(y)) => qs8::dequantize_f32(in_i8(0)?, *q, &mut y[..on]).map_err(msg),
        (Op::GlobalAvgPoolF32 { batch, pixels, channels, min, max }, Buf::F32(y)) => {
            ops::global_avg_pool_f32(*batch, *pixels, *channels, in_f32(0)?, &mut y[..on], *min, *max);
            Ok(())
        }
        (Op::GlobalAvgPoolQs8 { batch, pixels, channels, input, output, lo, hi }, Buf::I8(y)) => {
            qs8::global_avg_pool_qs8(*batch, *pixels, *channels, in_i8(0)?, *input, &mut y[..on], *output, *lo, *hi).map_err(msg)
        }
        (Op::PoolF32 { max_pool, geom, min, max }, Buf::F32(y)) => {
            ops::pool_f32(*max_pool, geom, in_f32(0)?, &mut y[..on], *min, *max);
            Ok(())
        }
        (Op::SoftmaxF32 { rows, cols }, Buf::F32(y)) => {
            ops::softmax_f32(*rows, *cols, in_f32(0)?, &mut y[..on]);
            Ok(())
        }
        (Op::BatchMatMulF32 { batch_a, batch_b, m, k, n }, Buf::F32(y)) => {
            let (a, b) = (in_f32(0)?, in_f32(1)?);
            let batch = (*batch_a).max(*batch_b);
            for i in 0..batch {
                let ai = &a[(i % batch_a) * m * k..][..m * k];
                let bi = &b[(i % batch_b) * k * n..][..k * n];
                let yi = &mut y[i * m * n..][..m * n];
                crate::optimized::gemm::sgemm(
                    1.0,
                    crate::optimized::gemm::Mat::row_major(ai, *m, *k),
                    crate::optimized::gemm::Mat::row_major(bi, *k, *n),
                    0.0,
                    yi,
                )?;
            }
            Ok(())
        }
        (Op::Transpose { dims, perm }, y) => {
            move_elems(input(0)?, len(0), y, on, |x, y| ops::transpose(dims, perm, x, y), |x, y| ops::transpose(dims, perm, x, y), |x, y| {
                ops::transpose(dims, perm, x, y)
            })
        }
        (Op::Copy, y) => move_elems(input(0)?, len(0), y, on, |x, y| y.copy_from_slice(x), |x, y| y.copy_from_slice(x), |x, y| y.copy_from_slice(x)),
        (Op::Slice { dims, offsets, sizes }, y) => move_elems(
            input(0)?,
            len(0),
            y,
            on,
            |x, y| ops::slice(dims, offsets, sizes, x, y),
            |x, y| ops::slice(dims, offsets, sizes, x, y),
            |x, y| ops::slice(dims, offsets, sizes, x, y),
        ),
        (Op::Pad { dims, pre, post, value_f32, value_i8 }, y) => move_elems(
            input(0)?,
            len(0),
            y,
            on,
            |x, y| ops::pad(dims, pre, post, *value_f32, x, y),
            |x, y| ops::pad(dims, pre, post, *value_i8, x, y),
            |x, y| ops::pad(dims, pre, post, 0, x, y),
        ),
        (Op::Concat { outer, inner_sizes }, y) => {
            let n = step.inputs.len();
            match y {
                Buf::F32(y) => {
                    let xs = (0..n).map(&in_f32).collect::<KernelResult<Vec<_>>>()?;
                    ops::concat(*outer, inner_sizes, &xs, &mut y[..on]);
                }
                Buf::I8(y) => {
                    let xs = (0..n).map(&in_i8).collect::<KernelResult<Vec<_>>>()?;
                    ops::concat(*outer, inner_sizes, &xs, &mut y[..on]);
                }
                Buf::I32(y) => {
                    let xs = (0..n)
                        .map(|k| match input(k)? {
                            Buf::I32(v) => Ok(&v[..len(k)]),
                            _ => Err(kerr!("expected an int32 buffer")),
                        })
                        .collect::<KernelResult<Vec<_>>>()?;
                    ops::concat(*outer, inner_sizes, &xs, &mut y[..on]);
                }
            }
            Ok(())
        }
        _ => Err(kerr!("buffer types do not match the operator")),
    }
}

/// The int8 binary kernels' entry points (equal lengths, or one side one repeated element).
trait Qs8Binary {
    fn both(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String>;
    fn scalar_b(&self, a: &[i8], b: i8, y: &mut [i8]) -> Result<(), alloc::string::String>;
    fn scalar_a(&self, a: i8, b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String>;
    fn repeated_b(&self, a: &[i8], b_row: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String>;
    fn repeated_a(&self, a_row: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String>;
}

macro_rules! qs8_binary_impl {
    ($t:ty) => {
        impl Qs8Binary for $t {
            fn both(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String> {
                self.apply(a, b, y)
            }
            fn scalar_b(&self, a: &[i8], b: i8, y: &mut [i8]) -> Result<(), alloc::string::String> {
                self.apply_scalar_b(a, b, y)
            }
            fn scalar_a(&self, a: i8, b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String> {
                self.apply_scalar_a(a, b, y)
            }
            fn repeated_b(&self, a: &[i8], b_row: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String> {
                self.apply_repeated_b(a, b_row, y)
            }
            fn repeated_a(&self, a_row: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), alloc::string::String> {
                self.apply_repeated_a(a_row, b, y)
            }
        }
    };
}
qs8_binary_impl!(qs8::AddQs8);
qs8_binary_impl!(qs8::MulQs8);

/// An int8 binary op over broadcast rows.
fn qs8_binary(op: &impl Qs8Binary, bc: &super::ops::Broadcast, a: &[i8], b: &[i8], y: &mut [i8]) -> KernelResult {
    // A per-channel operand over pixels: one call for the whole tensor, not one per short row.
    if let Some((rows, n, b_repeated)) = bc.repeated_row() {
        let y = &mut y[..rows * n];
        return if b_repeated { op.repeated_b(&a[..rows * n], &b[..n], y) } else { op.repeated_a(&a[..n], &b[..rows * n], y) }
            .map_err(msg);
    }
    let mut r = Ok(());
    bc.for_each_row(|o, ao, sa, bo, sb, n| {
        if r.is_err() {
            return;
        }
        let y = &mut y[o..o + n];
        r = match (sa, sb) {
            (1, 1) => op.both(&a[ao..ao + n], &b[bo..bo + n], y),
            (1, _) => op.scalar_b(&a[ao..ao + n], b[bo], y),
            (_, 1) => op.scalar_a(a[ao], &b[bo..bo + n], y),
            _ => op.scalar_b(&a[ao..ao + 1], b[bo], &mut y[..1]).map(|_| {
                let v = y[0];
                y.fill(v)
            }),
        };
    });
    r.map_err(msg)
}

/// Data movement on whatever element type the buffers hold (both the same).
fn move_elems(
    x: &Buf,
    xn: usize,
    y: &mut Buf,
    yn: usize,
    f: impl FnOnce(&[f32], &mut [f32]),
    g: impl FnOnce(&[i8], &mut [i8]),
    h: impl FnOnce(&[i32], &mut [i32]),
) -> KernelResult {
    match (x, y) {
        (Buf::F32(x), Buf::F32(y)) => f(&x[..xn], &mut y[..yn]),
        (Buf::I8(x), Buf::I8(y)) => g(&x[..xn], &mut y[..yn]),
        (Buf::I32(x), Buf::I32(y)) => h(&x[..xn], &mut y[..yn]),
        _ => return Err(kerr!("input and output element types differ")),
    }
    Ok(())
}

/// Every step once, timing each with `now()` (seconds): (node kind, step seconds) in order.
pub fn run_steps_timed(plan: &mut Plan, workers: &mut Workers, threads: usize, now: &dyn Fn() -> f64) -> KernelResult<Vec<(&'static str, f64)>> {
    let par = workers.get(threads);
    let mut times = Vec::with_capacity(plan.steps.len());
    for (k, step) in plan.steps.iter().enumerate() {
        let t = now();
        run_step(par, &mut plan.bufs, step).map_err(|e| kerr!("{ID}: step {k} ({}): {}", step.kind.name(), e.message))?;
        times.push((step.kind.name(), now() - t));
    }
    Ok(times)
}
