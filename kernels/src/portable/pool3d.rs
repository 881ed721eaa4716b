//! 3-D pooling over `[C, D, H, W]` or `[N, C, D, H, W]`: average, max with indices, adaptive
//! average. Reference loops in PyTorch's CPU order and accumulators (f32 sums for Float, Half
//! and BFloat16, f64 for Double, i64 for integers), with PyTorch's argument checks
//! (`pool3d_shape_check`): kernel, stride and dilation >= 1, padding at most half the kernel,
//! positive non-batch dims, and (average pooling only) an input at least as large as the kernel.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::conv::Acc;
use super::util::{pool_output_size, pool_span, require_contiguous, spatial, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::avg_pool3d.out" => avg_pool3d_out,
    "aten::max_pool3d_with_indices.out" => max_pool3d_with_indices_out,
    "aten::_adaptive_avg_pool3d.out" => adaptive_avg_pool3d_out,
}

/// Geometry of a 3-D pooling over `planes` planes (N·C) of `input` = [D, H, W].
#[derive(Clone, Copy, Debug)]
struct Pool3d {
    planes: usize,
    input: [usize; 3],
    output: [usize; 3],
    kernel: [usize; 3],
    stride: [usize; 3],
    padding: [usize; 3],
    dilation: [usize; 3],
}

impl Pool3d {
    fn in_plane(&self) -> usize {
        self.input.iter().product()
    }
    fn out_plane(&self) -> usize {
        self.output.iter().product()
    }
}

/// `[C, D, H, W]` or `[N, C, D, H, W]` → (planes, [D, H, W]). As in PyTorch, only the batch
/// dim of a 5-D input may be empty (adaptive pooling: the first dim of either rank).
fn pool3d_input(t: &TensorRef<'_>, op: &str, adaptive: bool) -> KernelResult<(usize, [usize; 3])> {
    require_contiguous(t, op)?;
    let s = t.sizes();
    if !matches!(s.len(), 4 | 5) {
        return Err(kerr!("{op}: input must be 4-D [C, D, H, W] or 5-D [N, C, D, H, W], got {s:?}"));
    }
    let first_checked = if adaptive { 1 } else { s.len() - 4 };
    if s[first_checked..].contains(&0) {
        return Err(kerr!("{op}: input {s:?} has an empty non-batch dimension"));
    }
    let planes = s[..s.len() - 3].iter().product();
    Ok((planes, [s[s.len() - 3], s[s.len() - 2], s[s.len() - 1]]))
}

/// The output's sizes: the input's leading dims, then `spatial`.
fn pooled_sizes(input: &TensorRef<'_>, spatial: [usize; 3]) -> Vec<usize> {
    let s = input.sizes();
    let mut v = s[..s.len() - 3].to_vec();
    v.extend_from_slice(&spatial);
    v
}

fn three(v: Vec<usize>) -> [usize; 3] {
    [v[0], v[1], v[2]]
}

/// Parses kernel/stride/padding/dilation (1 or 3 values; empty stride = kernel) and computes
/// the output size. `avg` adds avg_pool3d's rule that the input must cover the kernel.
#[allow(clippy::too_many_arguments)]
fn pool3d_geom(
    op: &str,
    planes: usize,
    input: [usize; 3],
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil: bool,
    avg: bool,
) -> KernelResult<Pool3d> {
    if kernel.is_empty() {
        return Err(kerr!("{op}: kernel_size must have 1 or 3 values"));
    }
    let kernel = three(spatial(kernel, 3, 1, "kernel_size", 1)?);
    let stride = if stride.is_empty() { kernel } else { three(spatial(stride, 3, 1, "stride", 1)?) };
    let padding = three(spatial(padding, 3, 0, "padding", 0)?);
    let dilation = three(spatial(dilation, 3, 1, "dilation", 1)?);
    // PyTorch's 3-D check compares the padding with half the kernel itself (not its dilated span).
    if (0..3).any(|d| padding[d] > kernel[d] / 2) {
        return Err(kerr!("{op}: padding {padding:?} must be at most half the kernel_size {kernel:?}"));
    }
    if avg && (0..3).any(|d| input[d] < kernel[d]) {
        return Err(kerr!("{op}: input [D, H, W] = {input:?} is smaller than kernel_size {kernel:?}"));
    }
    let mut output = [0; 3];
    for d in 0..3 {
        if pool_span(kernel[d], dilation[d]).is_none() {
            return Err(kerr!("{op}: kernel_size {kernel:?} with dilation {dilation:?} is too large"));
        }
        output[d] = pool_output_size(input[d], kernel[d], stride[d], padding[d], dilation[d], ceil)
            .filter(|&o| o > 0)
            .ok_or_else(|| {
                kerr!(
                    "{op}: input [D, H, W] = {input:?} is too small for kernel_size {kernel:?} \
                     (padding {padding:?}, dilation {dilation:?}): output size would be < 1"
                )
            })?;
    }
    Ok(Pool3d { planes, input, output, kernel, stride, padding, dilation })
}

/// Rejects Bool and mismatched dtypes (pooling keeps the input dtype).
fn check_same_dtype(op: &str, input: ScalarType, out: ScalarType) -> KernelResult {
    if out != input || input == ScalarType::Bool {
        return Err(kerr!("{op}: unsupported dtypes input {input} / out {out} (out must match a non-Bool input)"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// avg_pool3d
// ---------------------------------------------------------------------------------------------

/// `avg_pool3d.out(self, kernel_size, stride=[], padding=0, ceil_mode=False,
/// count_include_pad=True, divisor_override=None, *, out)`: args = [.., out(7), out].
pub fn avg_pool3d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "avg_pool3d";
    let input = args.tensor(0)?;
    let (planes, spatial_in) = pool3d_input(&input, OP, false)?;
    let ceil = args.bool(4)?;
    let include_pad = args.bool(5)?;
    let divisor = args.opt_int(6)?;
    if divisor == Some(0) {
        return Err(kerr!("{OP}: divisor_override must not be 0"));
    }
    let g = pool3d_geom(
        OP,
        planes,
        spatial_in,
        &args.int_list(1)?,
        &args.int_list(2)?,
        &args.int_list(3)?,
        &[],
        ceil,
        true,
    )?;
    let mut out = args.out(7)?;
    check_same_dtype(OP, input.dtype, out.dtype)?;
    out.resize(&pooled_sizes(&input, g.output))?;
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    match input.dtype {
        ScalarType::Double => avg_pool3d_ref::<f64>(&g, &x, &mut o, include_pad, divisor),
        ScalarType::Float | ScalarType::Half | ScalarType::BFloat16 => {
            avg_pool3d_ref::<f32>(&g, &x, &mut o, include_pad, divisor)
        }
        _ => avg_pool3d_ref::<i64>(&g, &x, &mut o, include_pad, divisor),
    }
    Ok(())
}

/// One dim of an average window: the input range it reads, and its length counting the
/// padding (clipped to the padded input on the right, as PyTorch counts).
fn avg_window(o: usize, g: &Pool3d, d: usize) -> (core::ops::Range<usize>, usize) {
    let (len, pad) = (g.input[d], g.padding[d]);
    // Padded coordinates: the window covers [start, end) of the padded input.
    let start = o * g.stride[d];
    let end = (start + g.kernel[d]).min(len + 2 * pad);
    let clipped = start.max(pad) - pad..end.min(len + pad).saturating_sub(pad);
    (clipped, end - start)
}

fn avg_pool3d_ref<A: Acc>(g: &Pool3d, x: &Elems<'_>, o: &mut ElemsMut<'_>, include_pad: bool, divisor: Option<i64>) {
    let [_, ih, iw] = g.input;
    let [od, oh, ow] = g.output;
    let mut oi = 0;
    for p in 0..g.planes {
        let base = p * g.in_plane();
        for z in 0..od {
            let (rz, nz) = avg_window(z, g, 0);
            for y in 0..oh {
                let (ry, ny) = avg_window(y, g, 1);
                for xo in 0..ow {
                    let (rx, nx) = avg_window(xo, g, 2);
                    let mut sum = A::ZERO;
                    for iz in rz.clone() {
                        for iy in ry.clone() {
                            let row = base + (iz * ih + iy) * iw;
                            for ix in rx.clone() {
                                sum = sum.add(A::load(x, row + ix));
                            }
                        }
                    }
                    let count = match divisor {
                        Some(d) => d,
                        None if include_pad => (nz * ny * nx) as i64,
                        None => (rz.len() * ry.len() * rx.len()) as i64,
                    };
                    // A window entirely in the padding reads nothing and gives 0 (PyTorch).
                    let empty = rz.is_empty() || ry.is_empty() || rx.is_empty();
                    let v = if empty || count == 0 { A::ZERO } else { sum.div(count) };
                    A::store(o, oi, v);
                    oi += 1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// max_pool3d_with_indices
// ---------------------------------------------------------------------------------------------

/// `max_pool3d_with_indices.out(self, kernel_size, stride=[], padding=0, dilation=1,
/// ceil_mode=False, *, out, indices)`: args = [.., out(6), indices(7), [out, indices]].
/// Indices are flat `(d * H + h) * W + w` offsets within each plane; a NaN wins over numbers
/// and a later NaN over an earlier one, as in PyTorch's CPU kernel.
pub fn max_pool3d_with_indices_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "max_pool3d";
    let input = args.tensor(0)?;
    let (planes, spatial_in) = pool3d_input(&input, OP, false)?;
    let g = pool3d_geom(
        OP,
        planes,
        spatial_in,
        &args.int_list(1)?,
        &args.int_list(2)?,
        &args.int_list(3)?,
        &args.int_list(4)?,
        args.bool(5)?,
        false,
    )?;
    let sizes = pooled_sizes(&input, g.output);
    let mut out = args.out(6)?;
    let mut idx = args.out(7)?;
    check_same_dtype(OP, input.dtype, out.dtype)?;
    if idx.dtype != ScalarType::Long {
        return Err(kerr!("{OP}: indices must be Long, got {}", idx.dtype));
    }
    out.resize(&sizes)?;
    idx.resize(&sizes)?;
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    let ix = idx.data_mut::<i64>()?;
    match input.dtype {
        ScalarType::Double => max_pool3d_ref::<f64>(&g, &x, &mut o, ix, f64::NEG_INFINITY),
        ScalarType::Float | ScalarType::Half | ScalarType::BFloat16 => {
            max_pool3d_ref::<f32>(&g, &x, &mut o, ix, f32::NEG_INFINITY)
        }
        d => max_pool3d_ref::<i64>(&g, &x, &mut o, ix, lowest_int(d)),
    }
    Ok(())
}

/// The smallest value of an integer dtype: a max window that reads nothing yields it.
fn lowest_int(dtype: ScalarType) -> i64 {
    match dtype {
        ScalarType::Char => i8::MIN as i64,
        ScalarType::Short => i16::MIN as i64,
        ScalarType::Int => i32::MIN as i64,
        ScalarType::Long => i64::MIN,
        _ => 0, // unsigned types
    }
}

/// One dim of a max window: the first tap at or after the input's start (PyTorch steps a
/// window that starts in the padding forward by whole dilations) and the end of the taps.
fn max_window(o: usize, g: &Pool3d, d: usize) -> (usize, usize) {
    let (pad, dil) = (g.padding[d], g.dilation[d]);
    let start = o * g.stride[d]; // padded coordinates
    let span = pool_span(g.kernel[d], dil).unwrap_or(usize::MAX); // checked by pool3d_geom
    let end = start.saturating_add(span).min(g.input[d] + pad).saturating_sub(pad);
    let first = if start >= pad { start - pad } else { (pad - start).div_ceil(dil) * dil + start - pad };
    (first, end)
}

fn max_pool3d_ref<A: Acc>(g: &Pool3d, x: &Elems<'_>, o: &mut ElemsMut<'_>, indices: &mut [i64], lowest: A) {
    let [_, ih, iw] = g.input;
    let [od, oh, ow] = g.output;
    let [dd, dh, dw] = g.dilation;
    let mut oi = 0;
    for p in 0..g.planes {
        let base = p * g.in_plane();
        for z in 0..od {
            let (z0, z1) = max_window(z, g, 0);
            for y in 0..oh {
                let (y0, y1) = max_window(y, g, 1);
                for xo in 0..ow {
                    let (x0, x1) = max_window(xo, g, 2);
                    // PyTorch's starting point: the lowest value at the first tap's offset.
                    let (mut best, mut best_at) = (lowest, (z0 * ih + y0) * iw + x0);
                    for iz in (z0..z1).step_by(dd) {
                        for iy in (y0..y1).step_by(dh) {
                            for ix in (x0..x1).step_by(dw) {
                                let at = (iz * ih + iy) * iw + ix;
                                let v = A::load(x, base + at);
                                if v > best || v.is_nan() {
                                    (best, best_at) = (v, at);
                                }
                            }
                        }
                    }
                    A::store(o, oi, best);
                    indices[oi] = best_at as i64;
                    oi += 1;
                }
            }
        }
    }
    debug_assert_eq!(oi, g.planes * g.out_plane());
}

// ---------------------------------------------------------------------------------------------
// _adaptive_avg_pool3d
// ---------------------------------------------------------------------------------------------

/// `_adaptive_avg_pool3d.out(self, SymInt[3] output_size, *, out)`: args = [self, size, out,
/// out]. Output cell `i` of a dim averages inputs `floor(i*in/out) .. ceil((i+1)*in/out)`;
/// the sum is divided by the window's depth, height and width in turn, as PyTorch does.
pub fn adaptive_avg_pool3d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "adaptive_avg_pool3d";
    let input = args.tensor(0)?;
    let (planes, spatial_in) = pool3d_input(&input, OP, true)?;
    let sizes = args.int_list(1)?;
    if sizes.len() != 3 {
        return Err(kerr!("{OP}: output_size {sizes:?} must have 3 values"));
    }
    let output = three(spatial(&sizes, 3, 1, "output_size", 0)?);
    let mut out = args.out(2)?;
    if out.dtype != input.dtype
        || !matches!(input.dtype, ScalarType::Float | ScalarType::Double | ScalarType::Half | ScalarType::BFloat16)
    {
        return Err(kerr!("{OP}: needs matching floating dtypes, got input {} / out {}", input.dtype, out.dtype));
    }
    out.resize(&pooled_sizes(&input, output))?;
    if out.numel() == 0 {
        return Ok(());
    }
    let g =
        Pool3d { planes, input: spatial_in, output, kernel: [1; 3], stride: [1; 3], padding: [0; 3], dilation: [1; 3] };
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    if input.dtype == ScalarType::Double {
        adaptive_avg_pool3d_ref::<f64>(&g, &x, &mut o);
    } else {
        adaptive_avg_pool3d_ref::<f32>(&g, &x, &mut o);
    }
    Ok(())
}

/// PyTorch's adaptive window along one dim: `floor(i*len/out) .. ceil((i+1)*len/out)`.
fn adaptive_window(i: usize, len: usize, out: usize) -> core::ops::Range<usize> {
    // u64 keeps `i * len` exact on 32-bit targets.
    let (i, len, out) = (i as u64, len as u64, out as u64);
    (i * len / out) as usize..((i + 1) * len).div_ceil(out) as usize
}

fn adaptive_avg_pool3d_ref<A: Acc>(g: &Pool3d, x: &Elems<'_>, o: &mut ElemsMut<'_>) {
    let [id, ih, iw] = g.input;
    let [od, oh, ow] = g.output;
    let mut oi = 0;
    for p in 0..g.planes {
        let base = p * g.in_plane();
        for z in 0..od {
            let rz = adaptive_window(z, id, od);
            for y in 0..oh {
                let ry = adaptive_window(y, ih, oh);
                for xo in 0..ow {
                    let rx = adaptive_window(xo, iw, ow);
                    let mut sum = A::ZERO;
                    for iz in rz.clone() {
                        for iy in ry.clone() {
                            let row = base + (iz * ih + iy) * iw;
                            for ix in rx.clone() {
                                sum = sum.add(A::load(x, row + ix));
                            }
                        }
                    }
                    let v = sum.div(rz.len() as i64).div(ry.len() as i64).div(rx.len() as i64);
                    A::store(o, oi, v);
                    oi += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    /// Deterministic values in [-4, 4) with a few repeats (a small LCG).
    fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) % 64) as f32 / 8.0 - 4.0
            })
            .collect()
    }

    /// Independent reference for one pooling configuration, in PyTorch's signed coordinates.
    struct Cfg {
        k: [i64; 3],
        s: [i64; 3],
        p: [i64; 3],
        dil: [i64; 3],
        ceil: bool,
    }

    impl Cfg {
        fn out_len(&self, d: usize, len: i64) -> i64 {
            let (k, s, p, dl) = (self.k[d], self.s[d], self.p[d], self.dil[d]);
            let num = len + 2 * p - dl * (k - 1) - 1 + if self.ceil { s - 1 } else { 0 };
            let mut o = num.div_euclid(s) + 1;
            if self.ceil && (o - 1) * s >= len + p {
                o -= 1;
            }
            o
        }
        fn out_dims(&self, inp: [usize; 3]) -> [usize; 3] {
            [0, 1, 2].map(|d| self.out_len(d, inp[d] as i64) as usize)
        }
    }

    /// Average pooling by the formula: sum over in-range taps / divisor.
    fn ref_avg(
        x: &[f64],
        planes: usize,
        inp: [usize; 3],
        c: &Cfg,
        include_pad: bool,
        div: Option<i64>,
        int: bool,
    ) -> Vec<f64> {
        let o = c.out_dims(inp);
        let [n0, n1, n2] = inp.map(|v| v as i64);
        let mut out = vec![];
        for p in 0..planes {
            for z in 0..o[0] as i64 {
                for y in 0..o[1] as i64 {
                    for w in 0..o[2] as i64 {
                        let st = [z * c.s[0] - c.p[0], y * c.s[1] - c.p[1], w * c.s[2] - c.p[2]];
                        let (mut sum, mut n_in, mut n_pad) = (0.0, 0i64, 1i64);
                        for d in 0..3 {
                            let len = [n0, n1, n2][d];
                            n_pad *= (st[d] + c.k[d]).min(len + c.p[d]) - st[d];
                        }
                        for a in st[0]..st[0] + c.k[0] {
                            for b in st[1]..st[1] + c.k[1] {
                                for e in st[2]..st[2] + c.k[2] {
                                    if (0..n0).contains(&a) && (0..n1).contains(&b) && (0..n2).contains(&e) {
                                        sum += x[p * (n0 * n1 * n2) as usize + ((a * n1 + b) * n2 + e) as usize];
                                        n_in += 1;
                                    }
                                }
                            }
                        }
                        let d = div.unwrap_or(if include_pad { n_pad } else { n_in });
                        out.push(if int { (sum as i64 / d) as f64 } else { sum / d as f64 });
                    }
                }
            }
        }
        out
    }

    /// Max pooling by the formula: the largest in-range tap (a NaN wins, the last NaN most).
    fn ref_max(x: &[f64], planes: usize, inp: [usize; 3], c: &Cfg) -> (Vec<f64>, Vec<i64>) {
        let o = c.out_dims(inp);
        let [n0, n1, n2] = inp.map(|v| v as i64);
        let (mut vals, mut idx) = (vec![], vec![]);
        for p in 0..planes {
            for z in 0..o[0] as i64 {
                for y in 0..o[1] as i64 {
                    for w in 0..o[2] as i64 {
                        let st = [z * c.s[0] - c.p[0], y * c.s[1] - c.p[1], w * c.s[2] - c.p[2]];
                        let mut best: Option<(f64, i64)> = None;
                        for i in 0..c.k[0] {
                            for j in 0..c.k[1] {
                                for l in 0..c.k[2] {
                                    let (a, b, e) = (st[0] + i * c.dil[0], st[1] + j * c.dil[1], st[2] + l * c.dil[2]);
                                    if !((0..n0).contains(&a) && (0..n1).contains(&b) && (0..n2).contains(&e)) {
                                        continue;
                                    }
                                    let at = (a * n1 + b) * n2 + e;
                                    let v = x[p * (n0 * n1 * n2) as usize + at as usize];
                                    let take = match best {
                                        None => true,
                                        Some((bv, _)) => v.is_nan() || (!bv.is_nan() && v > bv),
                                    };
                                    if take {
                                        best = Some((v, at));
                                    }
                                }
                            }
                        }
                        let (v, i) = best.expect("non-empty window");
                        vals.push(v);
                        idx.push(i);
                    }
                }
            }
        }
        (vals, idx)
    }

    fn shape_of(lead: &[usize], sp: [usize; 3]) -> Vec<usize> {
        let mut v = lead.to_vec();
        v.extend_from_slice(&sp);
        v
    }

    #[allow(clippy::too_many_arguments)]
    fn call_avg(
        h: &mut OpHarness,
        x: u32,
        k: &[i64],
        s: &[i64],
        p: &[i64],
        ceil: bool,
        include_pad: bool,
        div: Option<i64>,
        dtype: ScalarType,
        out_shape: &[usize],
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let (k, s, p) = (h.int_list(k), h.int_list(s), h.int_list(p));
        let (c, inc) = (h.bool(ceil), h.bool(include_pad));
        let d = match div {
            Some(v) => h.int(v),
            None => h.none(),
        };
        let out = h.out(dtype, out_shape);
        h.call(super::avg_pool3d_out, &[x, k, s, p, c, inc, d, out, out]).map(|_| out)
    }

    #[allow(clippy::too_many_arguments)]
    fn call_max(
        h: &mut OpHarness,
        x: u32,
        k: &[i64],
        s: &[i64],
        p: &[i64],
        d: &[i64],
        ceil: bool,
        dtype: ScalarType,
        out_shape: &[usize],
    ) -> Result<(u32, u32), rbuild_runtime::KernelError> {
        let (k, s, p, d) = (h.int_list(k), h.int_list(s), h.int_list(p), h.int_list(d));
        let c = h.bool(ceil);
        let out = h.out(dtype, out_shape);
        let idx = h.out(ScalarType::Long, out_shape);
        let list = h.tensor_list(&[out, idx]);
        h.call(super::max_pool3d_with_indices_out, &[x, k, s, p, d, c, out, idx, list]).map(|_| (out, idx))
    }

    fn call_adaptive(
        h: &mut OpHarness,
        x: u32,
        size: &[i64],
        dtype: ScalarType,
        out_shape: &[usize],
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let size = h.int_list(size);
        let out = h.out(dtype, out_shape);
        h.call(super::adaptive_avg_pool3d_out, &[x, size, out, out]).map(|_| out)
    }

    fn assert_close(got: &[f32], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((*g as f64 - w).abs() <= tol, "element {i}: got {g}, want {w}");
        }
    }

    #[test]
    fn avg_pool3d_hand_computed() {
        let mut h = OpHarness::new();
        // One 2x2x2 window over 1..8 (unbatched [C=1, 2, 2, 2]): mean 4.5.
        let xs: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        let x = h.f32(&[1, 2, 2, 2], &xs);
        let o = call_avg(&mut h, x, &[2], &[], &[0], false, true, None, ScalarType::Float, &[1, 1, 1, 1]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![4.5]);
        // Padding 1, stride 2 on the same cube: each 2x2x2 window holds one input (corner v),
        // so count_include_pad gives v/8, excluding the padding gives v, divisor 2 gives v/2.
        let o = call_avg(&mut h, x, &[2], &[2], &[1], false, true, None, ScalarType::Float, &[1, 2, 2, 2]).unwrap();
        assert_eq!(h.read::<f32>(o), xs.iter().map(|v| v / 8.0).collect::<Vec<_>>());
        let o = call_avg(&mut h, x, &[2], &[2], &[1], false, false, None, ScalarType::Float, &[1, 2, 2, 2]).unwrap();
        assert_eq!(h.read::<f32>(o), xs);
        let o = call_avg(&mut h, x, &[2], &[2], &[1], false, false, Some(2), ScalarType::Float, &[1, 2, 2, 2]).unwrap();
        assert_eq!(h.read::<f32>(o), xs.iter().map(|v| v / 2.0).collect::<Vec<_>>());
    }

    #[test]
    fn avg_pool3d_matches_reference_over_arguments() {
        // (leading dims, [D, H, W], kernel, stride, padding, ceil_mode)
        type Case<'a> = (&'a [usize], [usize; 3], [i64; 3], &'a [i64], [i64; 3], bool);
        let cases: &[Case] = &[
            (&[2, 3], [5, 6, 7], [2, 3, 2], &[], [0, 0, 0], false),
            (&[3], [5, 6, 7], [2, 3, 2], &[1], [1, 1, 0], false),
            (&[2, 2], [5, 4, 7], [3, 2, 3], &[2, 1, 3], [1, 1, 1], true),
            (&[1, 1], [6, 5, 5], [2, 2, 2], &[2], [1, 0, 1], true),
            (&[2], [3, 3, 3], [3, 3, 3], &[2], [1, 1, 1], true),
        ];
        for (ci, &(lead, inp, k, s, p, ceil)) in cases.iter().enumerate() {
            let stride = if s.is_empty() {
                k
            } else if s.len() == 1 {
                [s[0]; 3]
            } else {
                [s[0], s[1], s[2]]
            };
            let cfg = Cfg { k, s: stride, p, dil: [1; 3], ceil };
            let planes: usize = lead.iter().product();
            let xs = data(planes * inp.iter().product::<usize>(), ci as u64);
            let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
            let out_shape = shape_of(lead, cfg.out_dims(inp));
            for (include_pad, div) in [(true, None), (false, None), (true, Some(3)), (false, Some(-2))] {
                let mut h = OpHarness::new();
                let x = h.f32(&shape_of(lead, inp), &xs);
                let o = call_avg(&mut h, x, &k, s, &p, ceil, include_pad, div, ScalarType::Float, &out_shape)
                    .unwrap_or_else(|e| panic!("case {ci}: {e}"));
                let want = ref_avg(&x64, planes, inp, &cfg, include_pad, div, false);
                assert_close(&h.read::<f32>(o), &want, 1e-5);
            }
        }
    }

    #[test]
    fn avg_pool3d_other_dtypes() {
        let inp = [3, 4, 5];
        let cfg = Cfg { k: [2, 2, 3], s: [1, 2, 2], p: [1, 1, 1], dil: [1; 3], ceil: true };
        let out_shape = shape_of(&[2], cfg.out_dims(inp));
        let n = 2 * 60;
        // Long: exact sums with truncating division (values chosen so averages are fractional).
        let xl: Vec<i64> = (0..n as i64).map(|v| (v * 37) % 23 - 11).collect();
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 3, 4, 5], &xl);
        let o =
            call_avg(&mut h, x, &[2, 2, 3], &[1, 2, 2], &[1], true, false, None, ScalarType::Long, &out_shape).unwrap();
        let want = ref_avg(&xl.iter().map(|&v| v as f64).collect::<Vec<_>>(), 2, inp, &cfg, false, None, true);
        assert_eq!(h.read::<i64>(o), want.iter().map(|&v| v as i64).collect::<Vec<_>>());
        // Double and Half.
        let xs = data(n, 7);
        let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
        let want = ref_avg(&x64, 2, inp, &cfg, true, None, false);
        let x = h.tensor::<f64>(ScalarType::Double, &[2, 3, 4, 5], &x64);
        let o = call_avg(&mut h, x, &[2, 2, 3], &[1, 2, 2], &[1], true, true, None, ScalarType::Double, &out_shape)
            .unwrap();
        for (g, w) in h.read::<f64>(o).iter().zip(&want) {
            assert!((g - w).abs() < 1e-12);
        }
        let xh: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
        let x = h.tensor::<f16>(ScalarType::Half, &[2, 3, 4, 5], &xh);
        let o =
            call_avg(&mut h, x, &[2, 2, 3], &[1, 2, 2], &[1], true, true, None, ScalarType::Half, &out_shape).unwrap();
        let got: Vec<f32> = h.read::<f16>(o).iter().map(|v| v.to_f32()).collect();
        assert_close(&got, &want, 4e-3);
    }

    #[test]
    fn pool3d_ceil_mode_last_window_rule() {
        let mut h = OpHarness::new();
        // D = 5, kernel 2, stride 2, padding 1: floor gives 3; plain ceil would give 4, but the
        // 4th window would start at padded 6 >= 5 + 1 (entirely in the right padding).
        let x = h.f32(&[1, 5, 1, 1], &[1., 2., 3., 4., 5.]);
        let o =
            call_avg(&mut h, x, &[2, 1, 1], &[2, 1, 1], &[1, 0, 0], true, true, None, ScalarType::Float, &[1, 3, 1, 1])
                .unwrap();
        assert_eq!(h.read::<f32>(o), vec![0.5, 2.5, 4.5]);
        // Without padding, ceil adds the partial window [4]: clipped to the input, divisor 1.
        let x = h.f32(&[1, 5, 1, 1], &[1., 2., 3., 4., 5.]);
        let o = call_avg(&mut h, x, &[2, 1, 1], &[2, 1, 1], &[0], true, true, None, ScalarType::Float, &[1, 3, 1, 1])
            .unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.5, 3.5, 5.0]);
        let (o, i) =
            call_max(&mut h, x, &[2, 1, 1], &[2, 1, 1], &[0], &[1], true, ScalarType::Float, &[1, 3, 1, 1]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![2., 4., 5.]);
        assert_eq!(h.read::<i64>(i), vec![1, 3, 4]);
        // The same in floor mode drops the partial window.
        let o = call_avg(&mut h, x, &[2, 1, 1], &[2, 1, 1], &[0], false, true, None, ScalarType::Float, &[1, 2, 1, 1])
            .unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.5, 3.5]);
    }

    #[test]
    fn pool3d_empty_batch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[0, 2, 3, 3, 3], &[]);
        let o = call_avg(&mut h, x, &[2], &[], &[0], false, true, None, ScalarType::Float, &[0, 2, 1, 1, 1]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 2, 1, 1, 1]);
        let (o, _) = call_max(&mut h, x, &[2], &[], &[0], &[1], false, ScalarType::Float, &[0, 2, 1, 1, 1]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 2, 1, 1, 1]);
        let o = call_adaptive(&mut h, x, &[2, 1, 1], ScalarType::Float, &[0, 2, 2, 1, 1]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 2, 2, 1, 1]);
    }

    #[test]
    fn avg_pool3d_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 4, 4, 4], &[0.; 64]);
        let f = ScalarType::Float;
        let err =
            |h: &mut OpHarness,
             x: u32,
             k: &[i64],
             s: &[i64],
             p: &[i64],
             div: Option<i64>,
             dt: ScalarType,
             shape: &[usize]| { call_avg(h, x, k, s, p, false, true, div, dt, shape).unwrap_err().message };
        assert!(err(&mut h, x, &[], &[], &[0], None, f, &[1, 1, 1, 1, 1]).contains("kernel_size"));
        assert!(err(&mut h, x, &[2, 2], &[], &[0], None, f, &[1, 1, 2, 2, 2]).contains("kernel_size"));
        assert!(err(&mut h, x, &[0], &[], &[0], None, f, &[1, 1, 2, 2, 2]).contains("kernel_size"));
        assert!(err(&mut h, x, &[2], &[0], &[0], None, f, &[1, 1, 2, 2, 2]).contains("stride"));
        assert!(err(&mut h, x, &[2], &[-1], &[0], None, f, &[1, 1, 2, 2, 2]).contains("stride"));
        assert!(err(&mut h, x, &[2], &[], &[-1], None, f, &[1, 1, 2, 2, 2]).contains("padding"));
        assert!(err(&mut h, x, &[2], &[], &[2], None, f, &[1, 1, 2, 2, 2]).contains("half the kernel"));
        assert!(err(&mut h, x, &[5, 1, 1], &[], &[0], None, f, &[1, 1, 1, 4, 4]).contains("smaller than kernel"));
        assert!(err(&mut h, x, &[2], &[], &[0], Some(0), f, &[1, 1, 2, 2, 2]).contains("divisor_override"));
        assert!(err(&mut h, x, &[i64::MAX], &[], &[0], None, f, &[1, 1, 1, 1, 1]).contains("smaller than kernel"));
        // A huge stride is fine: one window.
        assert!(call_avg(&mut h, x, &[2], &[i64::MAX], &[1], false, true, None, f, &[1, 1, 1, 1, 1]).is_ok());
        assert!(err(&mut h, x, &[2], &[], &[0], None, ScalarType::Double, &[1, 1, 2, 2, 2]).contains("dtypes"));
        // A static output of the wrong shape.
        assert!(err(&mut h, x, &[2], &[], &[0], None, f, &[1, 1, 3, 3, 3]).contains("shape"));
        let b = h.bool_tensor(&[1, 2, 2, 2], &[true; 8]);
        assert!(err(&mut h, b, &[2], &[], &[0], None, ScalarType::Bool, &[1, 1, 1, 1]).contains("dtypes"));
        let x3 = h.f32(&[4, 4, 4], &[0.; 64]);
        assert!(err(&mut h, x3, &[2], &[], &[0], None, f, &[2, 2, 2]).contains("4-D"));
        let empty = h.f32(&[1, 0, 4, 4, 4], &[]);
        assert!(err(&mut h, empty, &[2], &[], &[0], None, f, &[1, 0, 2, 2, 2]).contains("empty"));
        let empty4 = h.f32(&[2, 0, 4, 4], &[]);
        assert!(err(&mut h, empty4, &[1], &[], &[0], None, f, &[2, 0, 4, 4]).contains("empty"));
    }

    #[test]
    fn max_pool3d_hand_computed_nan_and_indices() {
        let mut h = OpHarness::new();
        // [1, 2, 2, 3] planes: depth 0 = [[1, 9, 2], [3, 4, 5]], depth 1 = [[6, 0, 8], [7, 2, 1]].
        let x = h.f32(&[1, 2, 2, 3], &[1., 9., 2., 3., 4., 5., 6., 0., 8., 7., 2., 1.]);
        let (o, i) =
            call_max(&mut h, x, &[2, 2, 2], &[1], &[0], &[1], false, ScalarType::Float, &[1, 1, 1, 2]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![9., 9.]);
        assert_eq!(h.read::<i64>(i), vec![1, 1]);
        // NaN wins over numbers; of two NaNs the later one (offset 4) is reported.
        let x = h.f32(&[1, 1, 2, 3], &[1., f32::NAN, 2., 3., f32::NAN, 5.]);
        let (o, i) =
            call_max(&mut h, x, &[1, 2, 3], &[1], &[0], &[1], false, ScalarType::Float, &[1, 1, 1, 1]).unwrap();
        assert!(h.read::<f32>(o)[0].is_nan());
        assert_eq!(h.read::<i64>(i), vec![4]);
        // All -inf: the value stays -inf and the index is the window's first tap.
        let x = h.f32(&[1, 1, 1, 2], &[f32::NEG_INFINITY; 2]);
        let (o, i) =
            call_max(&mut h, x, &[1, 1, 2], &[1], &[0], &[1], false, ScalarType::Float, &[1, 1, 1, 1]).unwrap();
        assert_eq!((h.read::<f32>(o), h.read::<i64>(i)), (vec![f32::NEG_INFINITY], vec![0]));
    }

    #[test]
    fn max_pool3d_window_without_taps() {
        // Kernel 2, dilation 3, padding 1 over D = 2: the taps fall at -1 and 2, both outside.
        // PyTorch then keeps its start value (-inf, or the integer minimum) and the offset of
        // the first non-negative tap (2).
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2, 1, 1], &[5., 6.]);
        let (o, i) =
            call_max(&mut h, x, &[2, 1, 1], &[1], &[1, 0, 0], &[3, 1, 1], false, ScalarType::Float, &[1, 1, 1, 1])
                .unwrap();
        assert_eq!((h.read::<f32>(o), h.read::<i64>(i)), (vec![f32::NEG_INFINITY], vec![2]));
        let x = h.tensor::<i32>(ScalarType::Int, &[1, 2, 1, 1], &[5, 6]);
        let (o, i) =
            call_max(&mut h, x, &[2, 1, 1], &[1], &[1, 0, 0], &[3, 1, 1], false, ScalarType::Int, &[1, 1, 1, 1])
                .unwrap();
        assert_eq!((h.read::<i32>(o), h.read::<i64>(i)), (vec![i32::MIN], vec![2]));
    }

    #[test]
    fn max_pool3d_matches_reference_over_arguments() {
        // (leading dims, [D, H, W], kernel, stride, padding, dilation, ceil_mode)
        type Case<'a> = (&'a [usize], [usize; 3], [i64; 3], &'a [i64], [i64; 3], [i64; 3], bool);
        let cases: &[Case] = &[
            (&[2, 3], [5, 6, 7], [2, 3, 2], &[], [0, 0, 0], [1, 1, 1], false),
            (&[3], [5, 6, 7], [3, 3, 2], &[1], [1, 1, 1], [1, 1, 1], false),
            (&[2, 2], [7, 6, 7], [3, 2, 3], &[2, 1, 3], [1, 1, 1], [2, 1, 2], true),
            (&[1, 1], [6, 5, 8], [2, 3, 2], &[2], [1, 1, 1], [2, 2, 3], true),
            (&[2], [4, 4, 4], [2, 2, 2], &[3], [1, 1, 1], [1, 1, 1], true),
        ];
        for (ci, &(lead, inp, k, s, p, dil, ceil)) in cases.iter().enumerate() {
            let stride = if s.is_empty() {
                k
            } else if s.len() == 1 {
                [s[0]; 3]
            } else {
                [s[0], s[1], s[2]]
            };
            let cfg = Cfg { k, s: stride, p, dil, ceil };
            let planes: usize = lead.iter().product();
            let mut xs = data(planes * inp.iter().product::<usize>(), 100 + ci as u64);
            xs[3] = f32::NAN;
            let mid = xs.len() / 2;
            xs[mid] = f32::NAN;
            let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
            let out_shape = shape_of(lead, cfg.out_dims(inp));
            let mut h = OpHarness::new();
            let x = h.f32(&shape_of(lead, inp), &xs);
            let (o, i) = call_max(&mut h, x, &k, s, &p, &dil, ceil, ScalarType::Float, &out_shape)
                .unwrap_or_else(|e| panic!("case {ci}: {e}"));
            let (want, want_idx) = ref_max(&x64, planes, inp, &cfg);
            let got = h.read::<f32>(o);
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(g.is_nan() && w.is_nan() || *g as f64 == *w, "case {ci} element {j}: {g} vs {w}");
            }
            assert_eq!(h.read::<i64>(i), want_idx, "case {ci}");
            // The same in Int and Half (no NaN for Int: values scaled to distinct integers).
            let xi: Vec<i32> = x64.iter().map(|v| if v.is_nan() { -100 } else { (v * 8.0) as i32 }).collect();
            let x = h.tensor::<i32>(ScalarType::Int, &shape_of(lead, inp), &xi);
            let (o, i) = call_max(&mut h, x, &k, s, &p, &dil, ceil, ScalarType::Int, &out_shape).unwrap();
            let (want, want_idx) = ref_max(&xi.iter().map(|&v| v as f64).collect::<Vec<_>>(), planes, inp, &cfg);
            assert_eq!(h.read::<i32>(o), want.iter().map(|&v| v as i32).collect::<Vec<_>>());
            assert_eq!(h.read::<i64>(i), want_idx);
            let xh: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
            let x = h.tensor::<f16>(ScalarType::Half, &shape_of(lead, inp), &xh);
            let (o, i) = call_max(&mut h, x, &k, s, &p, &dil, ceil, ScalarType::Half, &out_shape).unwrap();
            // The data are multiples of 1/8, exact in f16: the same values and indices as f32.
            let got: Vec<f32> = h.read::<f16>(o).iter().map(|v| v.to_f32()).collect();
            let (want, want_idx) = ref_max(&x64, planes, inp, &cfg);
            for (g, w) in got.iter().zip(&want) {
                assert!(g.is_nan() && w.is_nan() || *g as f64 == *w);
            }
            assert_eq!(h.read::<i64>(i), want_idx);
        }
    }

    #[test]
    fn max_pool3d_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 4, 4, 4], &[0.; 64]);
        let f = ScalarType::Float;
        let err = |h: &mut OpHarness, k: &[i64], p: &[i64], d: &[i64], shape: &[usize]| {
            call_max(h, x, k, &[], p, d, false, f, shape).unwrap_err().message
        };
        assert!(err(&mut h, &[2], &[0], &[0], &[1, 2, 2, 2]).contains("dilation"));
        assert!(err(&mut h, &[2], &[0], &[1, 1], &[1, 2, 2, 2]).contains("dilation"));
        // Padding is limited by half the kernel itself, whatever the dilation.
        assert!(err(&mut h, &[2], &[2], &[3], &[1, 2, 2, 2]).contains("half the kernel"));
        // Dilated span 3*(3-1)+1 = 7 > 4: no output.
        assert!(err(&mut h, &[3], &[0], &[3], &[1, 1, 1, 1]).contains("output size"));
        assert!(err(&mut h, &[2], &[0], &[i64::MAX], &[1, 1, 1, 1]).contains("output size"));
        assert!(err(&mut h, &[4], &[0], &[i64::MAX], &[1, 1, 1, 1]).contains("too large"));
        let (k, s, p, d, c) = (h.int_list(&[2]), h.int_list(&[]), h.int_list(&[0]), h.int_list(&[1]), h.bool(false));
        let out = h.out(f, &[1, 2, 2, 2]);
        let idx = h.out(ScalarType::Int, &[1, 2, 2, 2]);
        let list = h.tensor_list(&[out, idx]);
        let e = h.call(super::max_pool3d_with_indices_out, &[x, k, s, p, d, c, out, idx, list]).unwrap_err();
        assert!(e.message.contains("indices must be Long"), "{e}");
    }

    #[test]
    fn adaptive_avg_pool3d_windows() {
        let mut h = OpHarness::new();
        // [1, 1, 2, 3] → [1, 1, 1, 2]: width windows 0..2 and 1..3 (overlapping), depth 0..1.
        let x = h.f32(&[1, 1, 2, 3], &[1., 2., 3., 4., 5., 6.]);
        let o = call_adaptive(&mut h, x, &[1, 1, 2], ScalarType::Float, &[1, 1, 1, 2]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![3.0, 4.0]);
        // Against the formula, batched, with output larger than the input along one dim.
        let (lead, inp, outp) = ([2usize, 3], [5usize, 4, 7], [3usize, 6, 2]);
        let planes = 6;
        let xs = data(planes * 140, 5);
        let x = h.f32(&shape_of(&lead, inp), &xs);
        let o = call_adaptive(&mut h, x, &outp.map(|v| v as i64), ScalarType::Float, &shape_of(&lead, outp)).unwrap();
        let win = |i: usize, n: usize, o: usize| (i * n / o)..((i + 1) * n).div_ceil(o);
        let mut want = vec![];
        for p in 0..planes {
            for z in 0..outp[0] {
                for y in 0..outp[1] {
                    for w in 0..outp[2] {
                        let (rz, ry, rw) = (win(z, inp[0], outp[0]), win(y, inp[1], outp[1]), win(w, inp[2], outp[2]));
                        let mut sum = 0.0;
                        for a in rz.clone() {
                            for b in ry.clone() {
                                for c in rw.clone() {
                                    sum += xs[p * 140 + (a * 4 + b) * 7 + c] as f64;
                                }
                            }
                        }
                        want.push(sum / (rz.len() * ry.len() * rw.len()) as f64);
                    }
                }
            }
        }
        assert_close(&h.read::<f32>(o), &want, 1e-5);
        // Double and BFloat16 give the same means.
        let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
        let x = h.tensor::<f64>(ScalarType::Double, &shape_of(&lead, inp), &x64);
        let o = call_adaptive(&mut h, x, &outp.map(|v| v as i64), ScalarType::Double, &shape_of(&lead, outp)).unwrap();
        for (g, w) in h.read::<f64>(o).iter().zip(&want) {
            assert!((g - w).abs() < 1e-12);
        }
        let xb: Vec<half::bf16> = xs.iter().map(|&v| half::bf16::from_f32(v)).collect();
        let x = h.tensor::<half::bf16>(ScalarType::BFloat16, &shape_of(&lead, inp), &xb);
        let o =
            call_adaptive(&mut h, x, &outp.map(|v| v as i64), ScalarType::BFloat16, &shape_of(&lead, outp)).unwrap();
        let got: Vec<f32> = h.read::<half::bf16>(o).iter().map(|v| v.to_f32()).collect();
        assert_close(&got, &want, 3e-2);
        // A zero output size gives an empty output.
        let o = call_adaptive(&mut h, x, &[0, 2, 2], ScalarType::BFloat16, &[2, 3, 0, 2, 2]).unwrap();
        assert_eq!(h.sizes(o), vec![2, 3, 0, 2, 2]);
    }

    #[test]
    fn adaptive_avg_pool3d_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2, 2, 2], &[0.; 8]);
        let f = ScalarType::Float;
        let msg = |h: &mut OpHarness, x: u32, size: &[i64], dt: ScalarType, shape: &[usize]| {
            call_adaptive(h, x, size, dt, shape).unwrap_err().message
        };
        assert!(msg(&mut h, x, &[1, 1], f, &[1, 1, 1, 1]).contains("3 values"));
        assert!(msg(&mut h, x, &[1, -1, 1], f, &[1, 1, 1, 1]).contains("output_size"));
        assert!(msg(&mut h, x, &[1, 1, 1], ScalarType::Double, &[1, 1, 1, 1]).contains("dtypes"));
        assert!(msg(&mut h, x, &[i64::MAX, i64::MAX, 2], f, &[1, 1, 1, 1]).contains("shape"));
        let xi = h.i64(&[1, 2, 2, 2], &[0; 8]);
        assert!(msg(&mut h, xi, &[1, 1, 1], ScalarType::Long, &[1, 1, 1, 1]).contains("dtypes"));
        let empty = h.f32(&[1, 2, 0, 2], &[]);
        assert!(msg(&mut h, empty, &[1, 1, 1], f, &[1, 2, 1, 1]).contains("empty"));
        let x2 = h.f32(&[2, 2], &[0.; 4]);
        assert!(msg(&mut h, x2, &[1, 1, 1], f, &[1, 1, 1]).contains("4-D"));
    }
}
