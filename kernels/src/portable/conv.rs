//! Convolution (1-D/2-D, grouped, dilated, transposed) and 2-D pooling: reference loops.
//!
//! f32 outputs accumulate in f32 in ExecuTorch's portable order (input channel, kernel row,
//! kernel column, then the bias), so a float program — an int8 reference representation
//! included — computes bit for bit what ExecuTorch's portable kernel computes. Other floating
//! outputs accumulate in f64, integer outputs in wrapping i64. 1-D inputs `[N, C, L]`
//! are computed as 2-D with a height of 1, as ExecuTorch does. The optimized module replaces the
//! f32 convolution with GEMM/direct kernels and tests itself against [`convolution_out`].

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::linalg::out_dtype;
use super::util::{pool_output_size, pool_span, require_contiguous, spatial, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::convolution.out" => convolution_out,
    "aten::avg_pool2d.out" => avg_pool2d_out,
    "aten::max_pool2d_with_indices.out" => max_pool2d_with_indices_out,
    "aten::_adaptive_avg_pool2d.out" => adaptive_avg_pool2d_out,
}

/// Accumulator of the reference loops: f32 (no fused multiply-add, as ExecuTorch's C++ has none
/// on a baseline x86-64/AArch64 build) for f32 outputs, f64 for other floating outputs,
/// wrapping i64 for integers.
pub(crate) trait Acc: Copy + PartialOrd {
    const ZERO: Self;
    fn load(e: &Elems<'_>, i: usize) -> Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, b: Self) -> Self;
    /// `self / n` (integer division truncates, as the C++ kernels do).
    fn div(self, n: i64) -> Self;
    fn is_nan(self) -> bool;
    fn store(o: &mut ElemsMut<'_>, i: usize, v: Self);
}

impl Acc for f64 {
    const ZERO: f64 = 0.0;
    fn load(e: &Elems<'_>, i: usize) -> f64 {
        e.f64(i)
    }
    fn mul_add(self, a: f64, b: f64) -> f64 {
        self + a * b
    }
    fn add(self, b: f64) -> f64 {
        self + b
    }
    fn div(self, n: i64) -> f64 {
        self / n as f64
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn store(o: &mut ElemsMut<'_>, i: usize, v: f64) {
        o.set_f64(i, v)
    }
}

impl Acc for f32 {
    const ZERO: f32 = 0.0;
    fn load(e: &Elems<'_>, i: usize) -> f32 {
        e.f64(i) as f32
    }
    fn mul_add(self, a: f32, b: f32) -> f32 {
        self + a * b
    }
    fn add(self, b: f32) -> f32 {
        self + b
    }
    fn div(self, n: i64) -> f32 {
        self / n as f32
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn store(o: &mut ElemsMut<'_>, i: usize, v: f32) {
        o.set_f64(i, v as f64)
    }
}

impl Acc for i64 {
    const ZERO: i64 = 0;
    fn load(e: &Elems<'_>, i: usize) -> i64 {
        e.i64(i)
    }
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    fn add(self, b: i64) -> i64 {
        self.wrapping_add(b)
    }
    fn div(self, n: i64) -> i64 {
        self.wrapping_div(n)
    }
    fn is_nan(self) -> bool {
        false
    }
    fn store(o: &mut ElemsMut<'_>, i: usize, v: i64) {
        o.set_i64(i, v)
    }
}

// ---------------------------------------------------------------------------------------------
// Convolution
// ---------------------------------------------------------------------------------------------

/// Geometry of a convolution in its 2-D form (1-D has `in_hw[0] == kernel[0] == out_hw[0] == 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeom {
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub groups: usize,
    pub in_hw: [usize; 2],
    pub kernel: [usize; 2],
    pub out_hw: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub transposed: bool,
    pub one_d: bool,
}

impl ConvGeom {
    /// Input channels per group.
    pub fn cig(&self) -> usize {
        self.c_in / self.groups
    }
    /// Output channels per group.
    pub fn cog(&self) -> usize {
        self.c_out / self.groups
    }
    /// The output tensor's sizes (rank 3 for 1-D, 4 for 2-D).
    pub fn out_sizes(&self) -> Vec<usize> {
        if self.one_d {
            vec![self.batch, self.c_out, self.out_hw[1]]
        } else {
            vec![self.batch, self.c_out, self.out_hw[0], self.out_hw[1]]
        }
    }
}

/// The validated operands of a `convolution.out` call.
pub(crate) struct ConvCall<'a> {
    pub geom: ConvGeom,
    pub input: TensorRef<'a>,
    pub weight: TensorRef<'a>,
    pub bias: Option<TensorRef<'a>>,
    pub out_dtype: ScalarType,
}

/// Lifts per-dim values of a 1-D convolution to the 2-D form (height takes `h`).
fn lift(v: Vec<usize>, one_d: bool, h: usize) -> [usize; 2] {
    if one_d {
        [h, v[0]]
    } else {
        [v[0], v[1]]
    }
}

/// Parses and checks `convolution.out` args = [input, weight, bias, stride, padding, dilation,
/// transposed, output_padding, groups, out, out], without touching `out`'s memory.
pub(crate) fn conv_call<'a>(args: &KernelArgs<'a>) -> KernelResult<ConvCall<'a>> {
    let input = args.tensor(0)?;
    let weight = args.tensor(1)?;
    let bias = args.opt_tensor(2)?;
    let out_dtype = out_dtype(args, 9)?;
    let lists = [args.int_list(3)?, args.int_list(4)?, args.int_list(5)?, args.int_list(7)?];
    let geom = conv_geom(&input, &weight, &lists, args.bool(6)?, args.int(8)?)?;
    if let Some(b) = &bias {
        if b.numel() != geom.c_out || b.dim() != 1 {
            return Err(kerr!("convolution: bias {:?} must be [{}]", b.sizes(), geom.c_out));
        }
    }
    Ok(ConvCall { geom, input, weight, bias, out_dtype })
}

/// Checks a convolution's input and weight shapes against its arguments and computes the
/// geometry. `lists` = [stride, padding, dilation, output_padding] as given.
pub(crate) fn conv_geom(
    input: &TensorRef<'_>,
    weight: &TensorRef<'_>,
    lists: &[Vec<i64>; 4],
    transposed: bool,
    groups: i64,
) -> KernelResult<ConvGeom> {
    let rank = input.dim();
    if rank != 3 && rank != 4 {
        return Err(kerr!("convolution: input must be 3-D [N,C,L] or 4-D [N,C,H,W], got {:?}", input.sizes()));
    }
    if weight.dim() != rank {
        return Err(kerr!("convolution: weight {:?} must have rank {rank} like input {:?}", weight.sizes(), input.sizes()));
    }
    let one_d = rank == 3;
    let nsp = rank - 2;
    if groups < 1 {
        return Err(kerr!("convolution: groups must be >= 1, got {groups}"));
    }
    let groups = groups as usize;
    let stride = lift(spatial(&lists[0], nsp, 1, "stride", 1)?, one_d, 1);
    let padding = lift(spatial(&lists[1], nsp, 0, "padding", 0)?, one_d, 0);
    let dilation = lift(spatial(&lists[2], nsp, 1, "dilation", 1)?, one_d, 1);
    let out_pad = lift(spatial(&lists[3], nsp, 0, "output_padding", 0)?, one_d, 0);

    let (is, ws) = (input.sizes(), weight.sizes());
    let (batch, c_in) = (is[0], is[1]);
    let in_hw = if one_d { [1, is[2]] } else { [is[2], is[3]] };
    let kernel = if one_d { [1, ws[2]] } else { [ws[2], ws[3]] };
    if c_in % groups != 0 {
        return Err(kerr!("convolution: {c_in} input channels are not divisible by groups={groups}"));
    }
    let c_out = if transposed {
        if ws[0] != c_in {
            return Err(kerr!("transposed convolution: weight {ws:?} must have {c_in} (input channels) rows"));
        }
        ws[1] * groups
    } else {
        if ws[1] * groups != c_in {
            return Err(kerr!(
                "convolution: weight {ws:?} expects {} input channels but input {is:?} has {c_in} (groups={groups})",
                ws[1] * groups
            ));
        }
        if ws[0] % groups != 0 {
            return Err(kerr!("convolution: {} output channels are not divisible by groups={groups}", ws[0]));
        }
        ws[0]
    };
    if kernel.contains(&0) {
        return Err(kerr!("convolution: weight {ws:?} has an empty kernel"));
    }
    let mut out_hw = [0usize; 2];
    for d in 0..2 {
        let span = dilation[d] * (kernel[d] - 1) + 1;
        out_hw[d] = if transposed {
            if out_pad[d] >= stride[d] && out_pad[d] >= dilation[d] {
                return Err(kerr!("transposed convolution: output_padding {out_pad:?} must be smaller than stride or dilation"));
            }
            let full = (in_hw[d].max(1) - 1)
                .checked_mul(stride[d])
                .and_then(|v| v.checked_add(span + out_pad[d]))
                .ok_or_else(|| kerr!("transposed convolution: output size overflows (stride {stride:?})"))?;
            if in_hw[d] == 0 || full <= 2 * padding[d] {
                return Err(kerr!("transposed convolution: padding {padding:?} leaves no output for input {is:?}"));
            }
            full - 2 * padding[d]
        } else {
            let padded = in_hw[d] + 2 * padding[d];
            if padded < span {
                return Err(kerr!(
                    "convolution: kernel {ws:?} (dilation {dilation:?}) is larger than the padded input {is:?} (padding {padding:?})"
                ));
            }
            (padded - span) / stride[d] + 1
        };
    }
    Ok(ConvGeom { batch, c_in, c_out, groups, in_hw, kernel, out_hw, stride, padding, dilation, transposed, one_d })
}

/// `convolution.out(input, weight, bias?, stride, padding, dilation, transposed,
/// output_padding, groups, *, out)`: the reference for every real dtype.
pub fn convolution_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let c = conv_call(args)?;
    for (t, what) in [(&c.input, "input"), (&c.weight, "weight")] {
        require_contiguous(t, what)?;
        if t.dtype != c.out_dtype {
            return Err(kerr!("convolution: {what} dtype {} differs from out dtype {}", t.dtype, c.out_dtype));
        }
    }
    if c.out_dtype == ScalarType::Bool {
        return Err(kerr!("convolution: Bool is not supported"));
    }
    let mut out = args.out(9)?;
    out.resize(&c.geom.out_sizes())?;
    let (x, w) = (Elems::of(&c.input)?, Elems::of(&c.weight)?);
    let b = c.bias.as_ref().map(Elems::of).transpose()?;
    let mut o = ElemsMut::of(&mut out)?;
    if c.out_dtype == ScalarType::Float {
        conv_ref::<f32>(&c.geom, &x, &w, b.as_ref(), &mut o);
    } else if o.is_floating() {
        conv_ref::<f64>(&c.geom, &x, &w, b.as_ref(), &mut o);
    } else {
        conv_ref::<i64>(&c.geom, &x, &w, b.as_ref(), &mut o);
    }
    Ok(())
}

/// `start + k*step - pad` when it lands in `0..len`.
#[inline]
pub(crate) fn tap(start: usize, k: usize, step: usize, pad: usize, len: usize) -> Option<usize> {
    (start + k * step).checked_sub(pad).filter(|&v| v < len)
}

fn conv_ref<A: Acc>(g: &ConvGeom, x: &Elems<'_>, w: &Elems<'_>, bias: Option<&Elems<'_>>, o: &mut ElemsMut<'_>) {
    let ([ih, iw], [kh, kw], [oh, ow]) = (g.in_hw, g.kernel, g.out_hw);
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let (cig, cog) = (g.cig(), g.cog());
    let bias_of = |oc: usize| bias.map_or(A::ZERO, |b| A::load(b, oc));
    if !g.transposed {
        for b in 0..g.batch {
            for oc in 0..g.c_out {
                let grp = oc / cog;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = A::ZERO;
                        for icg in 0..cig {
                            let plane = (b * g.c_in + grp * cig + icg) * ih;
                            let wbase = (oc * cig + icg) * kh;
                            for ky in 0..kh {
                                let Some(iy) = tap(oy * sh, ky, dh, ph, ih) else { continue };
                                for kx in 0..kw {
                                    let Some(ix) = tap(ox * sw, kx, dw, pw, iw) else { continue };
                                    let xv = A::load(x, (plane + iy) * iw + ix);
                                    acc = acc.mul_add(xv, A::load(w, (wbase + ky) * kw + kx));
                                }
                            }
                        }
                        A::store(o, ((b * g.c_out + oc) * oh + oy) * ow + ox, acc.add(bias_of(oc)));
                    }
                }
            }
        }
        return;
    }
    // Transposed: every input pixel scatters into the outputs its kernel window reaches. The
    // outputs start at the bias and, per output channel, take input pixels row by row and input
    // channels innermost: ExecuTorch's portable order, so f32 sums round as there.
    let plane = oh * ow;
    let mut acc: Vec<A> = (0..g.batch * g.c_out * plane).map(|i| bias_of((i / plane) % g.c_out)).collect();
    for b in 0..g.batch {
        for oc in 0..g.c_out {
            let (grp, j) = (oc / cog, oc % cog);
            for iy in 0..ih {
                for ix in 0..iw {
                    for icg in 0..cig {
                        let ic = grp * cig + icg;
                        let xv = A::load(x, ((b * g.c_in + ic) * ih + iy) * iw + ix);
                        let wbase = (ic * cog + j) * kh;
                        for ky in 0..kh {
                            let Some(oy) = tap(iy * sh, ky, dh, ph, oh) else { continue };
                            for kx in 0..kw {
                                let Some(ox) = tap(ix * sw, kx, dw, pw, ow) else { continue };
                                let i = (b * g.c_out + oc) * plane + oy * ow + ox;
                                acc[i] = acc[i].mul_add(xv, A::load(w, (wbase + ky) * kw + kx));
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, v) in acc.into_iter().enumerate() {
        A::store(o, i, v);
    }
}

/// Plain 1-D convolution in f64 sums (the reference path of `convolution.out`): x `[N, C_in,
/// L]`, w `[C_out, C_in/groups, K]`, optional bias `[C_out]`, out `[N, C_out, out_len]`. The
/// caller checks the shapes (`out_len = (L + 2p - d(K-1) - 1)/s + 1`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv1d_reference(
    x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32],
    [batch, c_in, len]: [usize; 3], [c_out, k, out_len]: [usize; 3], [stride, padding, dilation, groups]: [usize; 4],
) {
    let g = ConvGeom {
        batch, c_in, c_out, groups,
        in_hw: [1, len], kernel: [1, k], out_hw: [1, out_len],
        stride: [1, stride], padding: [0, padding], dilation: [1, dilation],
        transposed: false, one_d: true,
    };
    let b = bias.map(Elems::F32);
    conv_ref::<f64>(&g, &Elems::F32(x), &Elems::F32(w), b.as_ref(), &mut ElemsMut::F32(out));
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

/// Geometry of a 2-D pooling over `planes` planes of `in_hw`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeom {
    pub(crate) planes: usize,
    pub(crate) in_hw: [usize; 2],
    pub(crate) out_hw: [usize; 2],
    pub(crate) kernel: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) padding: [usize; 2],
    pub(crate) dilation: [usize; 2],
}

/// `[C, H, W]` or `[N, C, H, W]` → (planes, [H, W]).
pub(crate) fn pool_input(t: &TensorRef<'_>, op: &str) -> KernelResult<(usize, [usize; 2])> {
    require_contiguous(t, op)?;
    let s = t.sizes();
    match s.len() {
        3 | 4 => Ok((s[..s.len() - 2].iter().product(), [s[s.len() - 2], s[s.len() - 1]])),
        _ => Err(kerr!("{op}: input must be 3-D or 4-D, got {s:?}")),
    }
}

/// Parses kernel/stride/padding/dilation and computes the output size. `pad_limit` gives the
/// largest padding allowed for a kernel span (PyTorch: half the effective kernel).
#[allow(clippy::too_many_arguments)]
pub(crate) fn pool_geom(
    op: &str,
    planes: usize,
    in_hw: [usize; 2],
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil: bool,
) -> KernelResult<PoolGeom> {
    if kernel.is_empty() {
        return Err(kerr!("{op}: kernel_size must have 1 or 2 values"));
    }
    let kernel = spatial(kernel, 2, 1, "kernel_size", 1)?;
    let stride = if stride.is_empty() { kernel.clone() } else { spatial(stride, 2, 1, "stride", 1)? };
    let padding = spatial(padding, 2, 0, "padding", 0)?;
    let dilation = spatial(dilation, 2, 1, "dilation", 1)?;
    let mut out_hw = [0; 2];
    for d in 0..2 {
        let span = pool_span(kernel[d], dilation[d])
            .ok_or_else(|| kerr!("{op}: kernel_size {kernel:?} with dilation {dilation:?} is too large"))?;
        if padding[d] > span / 2 {
            return Err(kerr!("{op}: padding {padding:?} must be at most half the kernel size {kernel:?}"));
        }
        out_hw[d] = pool_output_size(in_hw[d], kernel[d], stride[d], padding[d], dilation[d], ceil)
            .filter(|&o| o > 0)
            .ok_or_else(|| kerr!("{op}: input {in_hw:?} is too small for kernel {kernel:?} (padding {padding:?})"))?;
    }
    let two = |v: Vec<usize>| [v[0], v[1]];
    Ok(PoolGeom {
        planes,
        in_hw,
        out_hw,
        kernel: two(kernel),
        stride: two(stride),
        padding: two(padding),
        dilation: two(dilation),
    })
}

pub(crate) fn pooled_sizes(input: &TensorRef<'_>, out_hw: [usize; 2]) -> Vec<usize> {
    let s = input.sizes();
    let mut v = s[..s.len() - 2].to_vec();
    v.extend_from_slice(&out_hw);
    v
}

/// `avg_pool2d.out(self, kernel_size, stride=[], padding=0, ceil_mode=False,
/// count_include_pad=True, divisor_override=None, *, out)`: args = [.., out(7), out].
pub fn avg_pool2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let input = args.tensor(0)?;
    let (planes, in_hw) = pool_input(&input, "avg_pool2d")?;
    let ceil = args.bool(4)?;
    let include_pad = args.bool(5)?;
    let divisor = args.opt_int(6)?;
    if divisor == Some(0) {
        return Err(kerr!("avg_pool2d: divisor_override must not be 0"));
    }
    let g = pool_geom("avg_pool2d", planes, in_hw, &args.int_list(1)?, &args.int_list(2)?, &args.int_list(3)?, &[], ceil)?;
    let mut out = args.out(7)?;
    if out.dtype != input.dtype || matches!(input.dtype, ScalarType::Bool) {
        return Err(kerr!("avg_pool2d: unsupported dtypes input {} / out {}", input.dtype, out.dtype));
    }
    out.resize(&pooled_sizes(&input, g.out_hw))?;
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    if o.is_floating() {
        avg_pool_ref::<f64>(&g, &x, &mut o, include_pad, divisor);
    } else {
        avg_pool_ref::<i64>(&g, &x, &mut o, include_pad, divisor);
    }
    Ok(())
}

fn avg_pool_ref<A: Acc>(g: &PoolGeom, x: &Elems<'_>, o: &mut ElemsMut<'_>, include_pad: bool, divisor: Option<i64>) {
    let ([ih, iw], [oh, ow], [kh, kw]) = (g.in_hw, g.out_hw, g.kernel);
    let ([sh, sw], [ph, pw]) = (g.stride, g.padding);
    for p in 0..g.planes {
        for oy in 0..oh {
            // Window in padded coordinates, clipped to the padded input (counts padding).
            let y0 = oy * sh;
            let y1 = (y0 + kh).min(ih + 2 * ph);
            let (cy0, cy1) = (y0.max(ph) - ph, y1.min(ih + ph).saturating_sub(ph));
            for ox in 0..ow {
                let x0 = ox * sw;
                let x1 = (x0 + kw).min(iw + 2 * pw);
                let (cx0, cx1) = (x0.max(pw) - pw, x1.min(iw + pw).saturating_sub(pw));
                let mut sum = A::ZERO;
                for iy in cy0..cy1 {
                    for ix in cx0..cx1 {
                        sum = sum.add(A::load(x, (p * ih + iy) * iw + ix));
                    }
                }
                let count = match divisor {
                    Some(d) => d,
                    None if include_pad => ((y1 - y0) * (x1 - x0)) as i64,
                    None => (cy1.saturating_sub(cy0) * cx1.saturating_sub(cx0)) as i64,
                };
                let v = if count == 0 { A::ZERO } else { sum.div(count) };
                A::store(o, (p * oh + oy) * ow + ox, v);
            }
        }
    }
}

/// `max_pool2d_with_indices.out(self, kernel_size, stride=[], padding=0, dilation=1,
/// ceil_mode=False, *, out, indices)`: args = [.., out(6), indices(7), [out, indices]].
/// Indices are flat `h * W + w` positions within each plane; NaN wins, as in PyTorch.
pub fn max_pool2d_with_indices_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let input = args.tensor(0)?;
    let (planes, in_hw) = pool_input(&input, "max_pool2d")?;
    let g = pool_geom(
        "max_pool2d",
        planes,
        in_hw,
        &args.int_list(1)?,
        &args.int_list(2)?,
        &args.int_list(3)?,
        &args.int_list(4)?,
        args.bool(5)?,
    )?;
    let sizes = pooled_sizes(&input, g.out_hw);
    let mut out = args.out(6)?;
    let mut idx = args.out(7)?;
    if out.dtype != input.dtype || matches!(input.dtype, ScalarType::Bool) {
        return Err(kerr!("max_pool2d: unsupported dtypes input {} / out {}", input.dtype, out.dtype));
    }
    if idx.dtype != ScalarType::Long {
        return Err(kerr!("max_pool2d: indices must be Long, got {}", idx.dtype));
    }
    out.resize(&sizes)?;
    idx.resize(&sizes)?;
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    let ix = idx.data_mut::<i64>()?;
    if o.is_floating() {
        max_pool_ref::<f64>(&g, &x, &mut o, ix);
    } else {
        max_pool_ref::<i64>(&g, &x, &mut o, ix);
    }
    Ok(())
}

fn max_pool_ref<A: Acc>(g: &PoolGeom, x: &Elems<'_>, o: &mut ElemsMut<'_>, indices: &mut [i64]) {
    let ([ih, iw], [oh, ow], [kh, kw]) = (g.in_hw, g.out_hw, g.kernel);
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    for p in 0..g.planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut best: Option<(A, usize)> = None;
                for ky in 0..kh {
                    let Some(iy) = tap(oy * sh, ky, dh, ph, ih) else { continue };
                    for kx in 0..kw {
                        let Some(ix) = tap(ox * sw, kx, dw, pw, iw) else { continue };
                        let v = A::load(x, (p * ih + iy) * iw + ix);
                        let take = match best {
                            None => true,
                            Some((b, _)) => !b.is_nan() && (v > b || v.is_nan()),
                        };
                        if take {
                            best = Some((v, iy * iw + ix));
                        }
                    }
                }
                // The padding limit guarantees a non-empty window; stay total anyway.
                let (v, i) = best.unwrap_or((A::ZERO, 0));
                let oi = (p * oh + oy) * ow + ox;
                A::store(o, oi, v);
                indices[oi] = i as i64;
            }
        }
    }
}

/// `_adaptive_avg_pool2d.out(self, SymInt[2] output_size, *, out)`: args = [self, size, out, out].
/// Output cell `i` averages input rows `floor(i*H/oh) .. ceil((i+1)*H/oh)`. Floating inputs
/// average in f64; Long inputs (which ExecuTorch's portable kernel also takes) sum exactly and
/// divide truncating, as integer `avg_pool2d` does.
pub fn adaptive_avg_pool2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let input = args.tensor(0)?;
    let (planes, [ih, iw]) = pool_input(&input, "adaptive_avg_pool2d")?;
    let size = spatial(&args.int_list(1)?, 2, 1, "output_size", 0)?;
    let (oh, ow) = (size[0], size[1]);
    if (ih == 0 && oh > 0) || (iw == 0 && ow > 0) {
        return Err(kerr!("adaptive_avg_pool2d: empty input {:?} cannot give output {size:?}", input.sizes()));
    }
    let mut out = args.out(2)?;
    if out.dtype != input.dtype || !(input.dtype.is_floating() || input.dtype == ScalarType::Long) {
        return Err(kerr!(
            "adaptive_avg_pool2d: needs matching floating (or Long) dtypes, got {} / {}",
            input.dtype,
            out.dtype
        ));
    }
    out.resize(&pooled_sizes(&input, [oh, ow]))?;
    let x = Elems::of(&input)?;
    let mut o = ElemsMut::of(&mut out)?;
    let geom = (planes, [ih, iw], [oh, ow]);
    if input.dtype == ScalarType::Long {
        adaptive_avg_ref::<i64>(geom, &x, &mut o);
    } else {
        adaptive_avg_ref::<f64>(geom, &x, &mut o);
    }
    Ok(())
}

fn adaptive_avg_ref<A: Acc>(
    (planes, [ih, iw], [oh, ow]): (usize, [usize; 2], [usize; 2]),
    x: &Elems<'_>,
    o: &mut ElemsMut<'_>,
) {
    for p in 0..planes {
        for oy in 0..oh {
            let (y0, y1) = (oy * ih / oh, ((oy + 1) * ih).div_ceil(oh));
            for ox in 0..ow {
                let (x0, x1) = (ox * iw / ow, ((ox + 1) * iw).div_ceil(ow));
                let mut sum = A::ZERO;
                for iy in y0..y1 {
                    for ix in x0..x1 {
                        sum = sum.add(A::load(x, (p * ih + iy) * iw + ix));
                    }
                }
                A::store(o, (p * oh + oy) * ow + ox, sum.div(((y1 - y0) * (x1 - x0)) as i64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    /// Calls convolution.out; returns (out id) or the error.
    #[allow(clippy::too_many_arguments)]
    fn conv(
        h: &mut OpHarness,
        x: u32,
        w: u32,
        b: Option<u32>,
        stride: &[i64],
        pad: &[i64],
        dil: &[i64],
        transposed: bool,
        out_pad: &[i64],
        groups: i64,
        out_sizes: &[usize],
        dtype: ScalarType,
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let b = b.unwrap_or_else(|| h.none());
        let (s, p, d, op) = (h.int_list(stride), h.int_list(pad), h.int_list(dil), h.int_list(out_pad));
        let (t, g) = (h.bool(transposed), h.int(groups));
        let out = h.out(dtype, out_sizes);
        h.call(super::convolution_out, &[x, w, b, s, p, d, t, op, g, out, out]).map(|_| out)
    }

    #[test]
    fn conv2d_3x3_pad1_hand_computed() {
        let mut h = OpHarness::new();
        // 1x1x3x3 input 1..9, all-ones 3x3 kernel, padding 1: each output sums its neighbours.
        let x = h.f32(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let w = h.f32(&[1, 1, 3, 3], &[1.; 9]);
        let b = h.f32(&[1], &[0.5]);
        let o = conv(&mut h, x, w, Some(b), &[1, 1], &[1, 1], &[1, 1], false, &[0, 0], 1, &[1, 1, 3, 3], ScalarType::Float)
            .unwrap();
        let expect = [12., 21., 16., 27., 45., 33., 24., 39., 28.].map(|v: f32| v + 0.5);
        assert_eq!(h.read::<f32>(o), expect.to_vec());
    }

    #[test]
    fn conv2d_stride2_dilation2_and_groups() {
        let mut h = OpHarness::new();
        // 2 channels, groups=2 (depthwise), 2x2 kernel with dilation 2 and stride 2 on 4x4.
        let xs: Vec<f32> = (0..32).map(|v| v as f32).collect();
        let x = h.f32(&[1, 2, 4, 4], &xs);
        let w = h.f32(&[2, 1, 2, 2], &[1., 0., 0., 1., 0., 1., 1., 0.]);
        let o = conv(&mut h, x, w, None, &[2], &[0], &[2], false, &[0], 2, &[1, 2, 1, 1], ScalarType::Float).unwrap();
        // ch0: x[0,0] + x[2,2] = 0 + 10; ch1: x[0,2] + x[2,0] = 18 + 24.
        assert_eq!(h.read::<f32>(o), vec![10., 42.]);
    }

    #[test]
    fn conv1d_and_integer() {
        let mut h = OpHarness::new();
        let x = h.i64(&[1, 1, 5], &[1, 2, 3, 4, 5]);
        let w = h.i64(&[2, 1, 3], &[1, 0, -1, 2, 2, 2]);
        let b = h.i64(&[2], &[100, 0]);
        let o = conv(&mut h, x, w, Some(b), &[2], &[1], &[1], false, &[0], 1, &[1, 2, 3], ScalarType::Long).unwrap();
        // Windows (padded): [0,1,2], [2,3,4], [4,5,0].
        assert_eq!(h.read::<i64>(o), vec![98, 98, 104, 6, 18, 18]);
    }

    #[test]
    fn conv_transposed_hand_computed() {
        let mut h = OpHarness::new();
        // 1-D transposed, stride 2, kernel 3, padding 1, output_padding 1: out len (2-1)*2-2+3+1 = 4.
        let x = h.f32(&[1, 1, 2], &[1., 10.]);
        let w = h.f32(&[1, 1, 3], &[1., 2., 3.]);
        let o = conv(&mut h, x, w, None, &[2], &[1], &[1], true, &[1], 1, &[1, 1, 4], ScalarType::Float).unwrap();
        // Full scatter: x0 at 0..3 → [1,2,3,0,0], x1 at 2..5 → [0,0,10,20,30]; crop 1 left.
        assert_eq!(h.read::<f32>(o), vec![2., 13., 20., 30.]);
    }

    #[test]
    fn conv_rejects_bad_shapes() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 3, 4, 4], &[0.; 48]);
        let w = h.f32(&[2, 2, 3, 3], &[0.; 36]);
        let e = conv(&mut h, x, w, None, &[1], &[0], &[1], false, &[0], 1, &[1, 2, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("input channels"), "{e}");
        let w = h.f32(&[2, 3, 5, 5], &[0.; 150]);
        let e = conv(&mut h, x, w, None, &[1], &[0], &[1], false, &[0], 1, &[1, 2, 1, 1], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("larger than the padded input"), "{e}");
        let w = h.f32(&[2, 3, 1, 1], &[0.; 6]);
        let b = h.f32(&[3], &[0.; 3]);
        let e = conv(&mut h, x, w, Some(b), &[1], &[0], &[1], false, &[0], 1, &[1, 2, 4, 4], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("bias"), "{e}");
    }

    #[test]
    fn avg_pool_padding_and_divisors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
        let call = |h: &mut OpHarness, include: bool, div: Option<i64>, ceil: bool| {
            let (k, s, p) = (h.int_list(&[2, 2]), h.int_list(&[1, 1]), h.int_list(&[1, 1]));
            let (c, inc) = (h.bool(ceil), h.bool(include));
            let d = match div {
                Some(v) => h.int(v),
                None => h.none(),
            };
            let out = h.out(ScalarType::Float, &[1, 1, 3, 3]);
            h.call(super::avg_pool2d_out, &[x, k, s, p, c, inc, d, out, out]).unwrap();
            h.read::<f32>(out)
        };
        assert_eq!(call(&mut h, true, None, false), vec![0.25, 0.75, 0.5, 1.0, 2.5, 1.5, 0.75, 1.75, 1.0]);
        assert_eq!(call(&mut h, false, None, false), vec![1., 1.5, 2., 2., 2.5, 3., 3., 3.5, 4.]);
        assert_eq!(call(&mut h, true, Some(1), false), vec![1., 3., 2., 4., 10., 6., 3., 7., 4.]);
    }

    #[test]
    fn avg_pool_ceil_mode_and_default_stride() {
        let mut h = OpHarness::new();
        let xs: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let x = h.f32(&[1, 3, 3], &xs);
        let (k, s, p) = (h.int_list(&[2]), h.int_list(&[]), h.int_list(&[0]));
        let (c, inc, d) = (h.bool(true), h.bool(true), h.none());
        let out = h.out(ScalarType::Float, &[1, 2, 2]);
        h.call(super::avg_pool2d_out, &[x, k, s, p, c, inc, d, out, out]).unwrap();
        // Ceil mode adds partial windows; they divide by the clipped window size.
        assert_eq!(h.read::<f32>(out), vec![3., 4.5, 7.5, 9.]);
    }

    #[test]
    fn max_pool_values_indices_and_nan() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 3, 3], &[1., 5., 2., 4., 3., f32::NAN, 0., 8., 1.]);
        let (k, s, p, d) = (h.int_list(&[2, 2]), h.int_list(&[1, 1]), h.int_list(&[0, 0]), h.int_list(&[1, 1]));
        let c = h.bool(false);
        let out = h.out(ScalarType::Float, &[1, 1, 2, 2]);
        let idx = h.out(ScalarType::Long, &[1, 1, 2, 2]);
        let list = h.tensor_list(&[out, idx]);
        h.call(super::max_pool2d_with_indices_out, &[x, k, s, p, d, c, out, idx, list]).unwrap();
        let v = h.read::<f32>(out);
        assert_eq!((v[0], v[2]), (5., 8.));
        assert!(v[1].is_nan() && v[3].is_nan());
        assert_eq!(h.read::<i64>(idx), vec![1, 5, 7, 5]);
    }

    #[test]
    fn max_pool_padding_dilation_integer() {
        let mut h = OpHarness::new();
        let xs: Vec<i32> = (0..16).map(|v| (v * 7) % 11).collect(); // 0 7 3 10 6 2 9 5 1 8 4 0 7 3 10 6
        let x = h.tensor::<i32>(ScalarType::Int, &[1, 4, 4], &xs);
        let (k, s, p, d) = (h.int_list(&[2]), h.int_list(&[2]), h.int_list(&[1]), h.int_list(&[2]));
        let c = h.bool(false);
        let out = h.out(ScalarType::Int, &[1, 2, 2]);
        let idx = h.out(ScalarType::Long, &[1, 2, 2]);
        let list = h.tensor_list(&[out, idx]);
        h.call(super::max_pool2d_with_indices_out, &[x, k, s, p, d, c, out, idx, list]).unwrap();
        // Window (oy,ox) reads rows {2oy-1, 2oy+1}, cols {2ox-1, 2ox+1} that exist.
        assert_eq!(h.read::<i32>(out), vec![2, 5, 3, 6]);
        assert_eq!(h.read::<i64>(idx), vec![5, 7, 13, 15]);
    }

    #[test]
    fn pool_rejects_large_padding() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 4, 4], &[0.; 16]);
        let (k, s, p) = (h.int_list(&[2, 2]), h.int_list(&[]), h.int_list(&[2, 2]));
        let (c, inc, d) = (h.bool(false), h.bool(true), h.none());
        let out = h.out(ScalarType::Float, &[1, 1, 4, 4]);
        let e = h.call(super::avg_pool2d_out, &[x, k, s, p, c, inc, d, out, out]).unwrap_err();
        assert!(e.message.contains("half the kernel"), "{e}");
    }

    #[test]
    fn adaptive_avg_pool_overlapping_windows() {
        let mut h = OpHarness::new();
        let xs: Vec<f32> = (1..=6).map(|v| v as f32).collect();
        let x = h.f32(&[1, 1, 2, 3], &xs);
        let size = h.int_list(&[1, 2]);
        let out = h.out(ScalarType::Float, &[1, 1, 1, 2]);
        h.call(super::adaptive_avg_pool2d_out, &[x, size, out, out]).unwrap();
        // Columns 0..2 and 1..3 over both rows.
        assert_eq!(h.read::<f32>(out), vec![3.0, 4.0]);
    }

    #[test]
    fn adaptive_avg_pool_of_long_truncates() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 2, 2], &[1, 2, 4, 4, -1, -2, -4, -4]);
        let size = h.int_list(&[1, 1]);
        let out = h.out(ScalarType::Long, &[1, 1, 1]);
        // 11 / 4 and -11 / 4 truncate toward zero.
        let out2 = h.out(ScalarType::Long, &[2, 1, 1]);
        assert!(h.call(super::adaptive_avg_pool2d_out, &[x, size, out, out]).is_err(), "shape [2,1,1] expected");
        h.call(super::adaptive_avg_pool2d_out, &[x, size, out2, out2]).unwrap();
        assert_eq!(h.read::<i64>(out2), vec![2, -2]);
        let int = h.tensor(ScalarType::Int, &[1, 2, 2], &[1i32, 2, 3, 4]);
        let oi = h.out(ScalarType::Int, &[1, 1, 1]);
        assert!(h.call(super::adaptive_avg_pool2d_out, &[int, size, oi, oi]).is_err());
    }
}
