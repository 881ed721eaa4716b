//! Running a [`Plan`]: the call's inputs copied into their buffers, each step on its buffers,
//! the outputs copied out.

use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID as ID;
use rbuild_runtime::kernel::{KernelArgs, KernelResult};
use rbuild_runtime::{kerr, KernelError, ScalarType};

use super::ops;
use super::plan::{Buf, Extern, Op, Plan, Step};
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

/// A delegate input's bytes (the call's tensor, `ext.dtype`) into its buffer: half and
/// bfloat16 widened to f32, uint8 shifted into the int8 form.
pub(super) fn copy_in(ext: &Extern, bytes: &[u8], buf: &mut Buf) -> Result<(), alloc::string::String> {
    let n: usize = ext.dims.iter().product();
    let width = ext.dtype.size();
    if bytes.len() != n * width {
        return Err(alloc::format!("{} bytes for {n} elements of {}", bytes.len(), ext.dtype));
    }
    let short = || alloc::format!("buffer shorter than {n}");
    match (ext.dtype, buf) {
        (ScalarType::Float, Buf::F32(v)) => {
            let v = v.get_mut(..n).ok_or_else(short)?;
            // An aligned tensor (the usual case) is one copy.
            match bytemuck::try_cast_slice::<u8, f32>(bytes) {
                Ok(x) if cfg!(target_endian = "little") => v.copy_from_slice(x),
                _ => v.iter_mut().zip(bytes.chunks_exact(4)).for_each(|(o, c)| *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            }
        }
        (ScalarType::Half, Buf::F32(v)) => v.get_mut(..n).ok_or_else(short)?.iter_mut().zip(bytes.chunks_exact(2)).for_each(|(o, c)| *o = half::f16::from_le_bytes([c[0], c[1]]).to_f32()),
        (ScalarType::BFloat16, Buf::F32(v)) => v.get_mut(..n).ok_or_else(short)?.iter_mut().zip(bytes.chunks_exact(2)).for_each(|(o, c)| *o = half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        (ScalarType::Char, Buf::I8(v)) => v.get_mut(..n).ok_or_else(short)?.copy_from_slice(bytemuck::cast_slice(bytes)),
        (ScalarType::Byte, Buf::I8(v)) => v.get_mut(..n).ok_or_else(short)?.iter_mut().zip(bytes).for_each(|(o, &x)| *o = (x ^ 0x80) as i8),
        (ScalarType::Int, Buf::I32(v)) => v.get_mut(..n).ok_or_else(short)?.iter_mut().zip(bytes.chunks_exact(4)).for_each(|(o, c)| *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        (d, _) => return Err(alloc::format!("input of dtype {d} does not fit its buffer")),
    }
    Ok(())
}

/// A delegate output's buffer into the call's tensor bytes (the reverse of [`copy_in`]).
pub(super) fn copy_out(ext: &Extern, buf: &Buf, bytes: &mut [u8]) -> Result<(), alloc::string::String> {
    let n: usize = ext.dims.iter().product();
    if bytes.len() != n * ext.dtype.size() {
        return Err(alloc::format!("{} bytes for {n} elements of {}", bytes.len(), ext.dtype));
    }
    let short = || alloc::format!("buffer shorter than {n}");
    match (ext.dtype, buf) {
        (ScalarType::Float, Buf::F32(v)) => bytes.chunks_exact_mut(4).zip(v.get(..n).ok_or_else(short)?).for_each(|(o, x)| o.copy_from_slice(&x.to_le_bytes())),
        (ScalarType::Half, Buf::F32(v)) => bytes.chunks_exact_mut(2).zip(v.get(..n).ok_or_else(short)?).for_each(|(o, &x)| o.copy_from_slice(&half::f16::from_f32(x).to_le_bytes())),
        (ScalarType::BFloat16, Buf::F32(v)) => bytes.chunks_exact_mut(2).zip(v.get(..n).ok_or_else(short)?).for_each(|(o, &x)| o.copy_from_slice(&half::bf16::from_f32(x).to_le_bytes())),
        (ScalarType::Char, Buf::I8(v)) => bytes.iter_mut().zip(v.get(..n).ok_or_else(short)?).for_each(|(o, &x)| *o = x as u8),
        (ScalarType::Byte, Buf::I8(v)) => bytes.iter_mut().zip(v.get(..n).ok_or_else(short)?).for_each(|(o, &x)| *o = x as u8 ^ 0x80),
        (ScalarType::Int, Buf::I32(v)) => bytes.chunks_exact_mut(4).zip(v.get(..n).ok_or_else(short)?).for_each(|(o, x)| o.copy_from_slice(&x.to_le_bytes())),
        (d, _) => return Err(alloc::format!("output of dtype {d} does not fit its buffer")),
    }
    Ok(())
}

pub fn execute(plan: &mut Plan, workers: &mut Workers, threads: usize, args: &KernelArgs<'_>) -> KernelResult {
    let (ni, no) = (plan.inputs.len(), plan.outputs.len());
    if args.len() != ni + no {
        return Err(kerr!("{ID}: delegate call has {} arguments, the payload takes {ni} inputs + {no} outputs", args.len()));
    }
    for ext in &plan.inputs {
        let i = ext.arg;
        let t = args.tensor(i).map_err(|e| kerr!("{ID}: input {i}: {e}"))?;
        let numel: usize = ext.dims.iter().product();
        if t.dtype != ext.dtype || t.numel() != numel {
            return Err(kerr!("{ID}: input {i} is {} {:?}, the payload expects {} {:?}", t.dtype, t.sizes(), ext.dtype, ext.dims));
        }
        if !t.dim_order.is_contiguous() {
            return Err(kerr!("{ID}: input {i}: dim order {:?} is not supported (contiguous only)", t.dim_order));
        }
        let bytes = t.bytes().get(..numel * ext.dtype.size()).ok_or_else(|| kerr!("{ID}: input {i}: tensor data shorter than its shape"))?;
        copy_in(ext, bytes, &mut plan.bufs[ext.buf]).map_err(|e| kerr!("{ID}: input {i}: {e}"))?;
    }
    run_steps(plan, workers, threads)?;
    for ext in &plan.outputs {
        let j = ext.arg;
        let mut t = args.out(j).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        if t.dtype != ext.dtype {
            return Err(kerr!("{ID}: output {j}: the program's tensor is {}, the payload's value is {}", t.dtype, ext.dtype));
        }
        let numel: usize = ext.dims.iter().product();
        if t.numel() != numel {
            t.resize(&ext.dims).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        }
        copy_out(ext, &plan.bufs[ext.buf], t.bytes_mut()).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
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
    let mut result = run_into(par, bufs, step, &mut out, on, &mut scratch);
    if let (Some(round), Buf::F32(y), Ok(())) = (step.round, &mut out, &result) {
        match y.get_mut(..on) {
            Some(y) => round.apply(y),
            None => result = Err(kerr!("output buffer shorter than {on}")),
        }
    }
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
        (Op::ConvQu8(op), Buf::I8(y)) => op.run(par, in_i8(0)?, &mut y[..on]).map_err(msg),
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
                *y = x.max(*lo).min(*hi);
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
        (Op::BatchMatMulF32 { op, min, max }, Buf::F32(y)) => op.run(in_f32(0)?, in_f32(1)?, &mut y[..on], *min, *max),
        (Op::FullyConnectedRuntime { op, bias, min, max }, Buf::F32(y)) => {
            let b = if *bias { Some(in_f32(2)?) } else { None };
            op.run(in_f32(0)?, in_f32(1)?, b, &mut y[..on], *min, *max)
        }
        (Op::ConvQd8 { op, min, max }, Buf::F32(y)) => op.run(par, in_f32(0)?, &mut y[..on], *min, *max).map_err(msg),
        (Op::DeconvQs8(op), Buf::I8(y)) => op.run(par, in_i8(0)?, &mut y[..on]).map_err(msg),
        (Op::DeconvQd8 { op, min, max }, Buf::F32(y)) => op.run(par, in_f32(0)?, &mut y[..on], *min, *max).map_err(msg),
        (Op::Requantize(op), Buf::I8(y)) => op.apply(in_i8(0)?, &mut y[..on]).map_err(msg),
        (Op::MaxPoolQs8 { geom, lo, hi }, Buf::I8(y)) => qs8::max_pool_qs8(geom, in_i8(0)?, &mut y[..on], *lo, *hi).map_err(msg),
        (Op::ResizeF32(op), Buf::F32(y)) => op.run_f32(in_f32(0)?, &mut y[..on]).map_err(msg),
        (Op::ResizeQs8(op), Buf::I8(y)) => op.run_s8(in_i8(0)?, &mut y[..on]).map_err(msg),
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
