//! Channel-wise (depthwise) f32 convolution: one input channel per group, any multiplier.
//!
//! Memory-bound, with small planes late in a network, so each plane is computed as ONE long
//! contiguous loop the compiler vectorizes, with no border cases:
//!
//! - The input plane is copied into zero-padded "phase planes" `Ph[qy][qx][R][J] =
//!   P[R·sh + qy][J·sw + qx]` (P = padded input), each with row pitch `qw`. Tap (ky, kx) then
//!   reads phase plane `(ky·dh % sh, kx·dw % sw)` at a fixed offset from the output position.
//! - Output (oy, ox) is computed at flat position `oy·qw + ox` of a "wide" plane, so every tap
//!   is a single slice; the `qw - ow` extra columns per row are discarded when copying out.
//!
//! A stride-1 unpadded convolution reads the input plane directly (pitch `iw`).

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::KernelResult;

use super::gemm::{par_units, PAR_MIN_WORK};
use crate::portable::conv::ConvGeom;

/// Per-convolution constants shared by every plane.
struct Plan {
    /// Read the input plane itself (stride 1, no padding) instead of phase planes.
    direct: bool,
    /// Rows and row pitch of each phase plane (pitch = input width when `direct`).
    qh: usize,
    pitch: usize,
    /// Start of each tap's run in the source, relative to output position 0.
    offsets: Vec<usize>,
    /// Length of the wide output run: `(oh - 1)·pitch + ow`.
    wide_len: usize,
    /// Scratch for the phase planes plus one padded input row.
    phases_len: usize,
}

impl Plan {
    fn new(g: &ConvGeom) -> Plan {
        let ([_, iw], [kh, kw], [oh, ow]) = (g.in_hw, g.kernel, g.out_hw);
        let ([sh, sw], [dh, dw]) = (g.stride, g.dilation);
        let direct = g.stride == [1, 1] && g.padding == [0, 0];
        let (qh, pitch) = if direct { (0, iw) } else { (oh + (kh - 1) * dh / sh, ow + (kw - 1) * dw / sw) };
        let offsets = (0..kh * kw)
            .map(|i| {
                let (ty, tx) = ((i / kw) * dh, (i % kw) * dw);
                if direct {
                    ty * iw + tx
                } else {
                    ((ty % sh) * sw + tx % sw) * qh * pitch + (ty / sh) * pitch + tx / sw
                }
            })
            .collect();
        let phases_len = sh * sw * qh * pitch + sw * pitch;
        Plan { direct, qh, pitch, offsets, wide_len: (oh - 1) * pitch + ow, phases_len }
    }
}

/// Depthwise convolution for `g.cig() == 1`; output plane `(b, oc)` reads input channel
/// `oc / cog` (its group).
pub(crate) fn conv(threads: usize, g: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, o: &mut [f32]) -> KernelResult {
    let ([ih, iw], [kh, kw], [oh, ow]) = (g.in_hw, g.kernel, g.out_hw);
    let (ohw, taps, cog) = (oh * ow, kh * kw, g.cog());
    let plan = Plan::new(g);
    let threads = if o.len().saturating_mul(taps) < PAR_MIN_WORK { 1 } else { threads };
    par_units(threads, o, ohw, |first, planes| {
        // Zeroed once per worker: fill_phases only ever rewrites input positions.
        let mut phases = if plan.direct { Vec::new() } else { vec![0.0; plan.phases_len] };
        let mut wide = Vec::new();
        for (i, out) in planes.chunks_mut(ohw).enumerate() {
            let p = first + i;
            let (b, oc) = (p / g.c_out, p % g.c_out);
            let input = &x[(b * g.c_in + oc / cog) * ih * iw..][..ih * iw];
            let bias = bias.map_or(0.0, |bv| bv[oc]);
            plane(g, &plan, input, &w[oc * taps..][..taps], bias, out, &mut phases, &mut wide);
        }
        Ok(())
    })
}

/// One output plane: `out[oy, ox] = bias + Σ w[ky, kx] · x[oy·sh + ky·dh - ph, ox·sw + kx·dw - pw]`.
#[allow(clippy::too_many_arguments)]
fn plane(g: &ConvGeom, plan: &Plan, x: &[f32], w: &[f32], bias: f32, out: &mut [f32], phases: &mut [f32], wide: &mut Vec<f32>) {
    let ow = g.out_hw[1];
    let src: &[f32] = if plan.direct {
        x
    } else {
        fill_phases(g, plan, x, phases);
        phases
    };
    if plan.pitch == ow {
        accumulate(&mut out[..plan.wide_len], src, &plan.offsets, w, bias);
    } else {
        wide.resize(plan.wide_len, 0.0);
        accumulate(wide, src, &plan.offsets, w, bias);
        for (orow, wrow) in out.chunks_mut(ow).zip(wide.chunks(plan.pitch)) {
            orow.copy_from_slice(&wrow[..ow]);
        }
    }
}

/// Copies input plane `x` into the phase planes (see the module docs). Only positions that
/// hold input values are written: `phases` was zeroed once for this plan and its padding stays
/// zero from plane to plane, so there is no per-plane border work.
fn fill_phases(g: &ConvGeom, plan: &Plan, x: &[f32], phases: &mut [f32]) {
    let ([ih, iw], [sh, sw], [ph, pw]) = (g.in_hw, g.stride, g.padding);
    let (qh, qw) = (plan.qh, plan.pitch);
    let plane_len = qh * qw;
    // [phase planes | one padded input row, split from there into the sw column phases]
    let (planes, prow) = phases.split_at_mut(sh * sw * plane_len);
    for (qy, block) in planes.chunks_mut(sw * plane_len).enumerate() {
        for r in 0..qh {
            let Some(iy) = (r * sh + qy).checked_sub(ph).filter(|&iy| iy < ih) else { continue };
            let row = &x[iy * iw..][..iw];
            if sw == 1 {
                copy_at(&mut block[r * qw..][..qw], row, pw); // the padded row is the only phase
            } else {
                copy_at(prow, row, pw);
                split_phases(prow, block, r * qw, qw, sw, plane_len);
            }
        }
    }
}

/// `dst[at + j] = src[j]` for the `j` that fit in `dst`.
#[inline]
fn copy_at(dst: &mut [f32], src: &[f32], at: usize) {
    if let Some(d) = dst.get_mut(at..) {
        let n = d.len().min(src.len());
        d[..n].copy_from_slice(&src[..n]);
    }
}

/// De-interleaves padded row `prow` into row `start..start + len` of each of the `stride`
/// column-phase planes in `block`: `phase[q][j] = prow[j·stride + q]`.
fn split_phases(prow: &[f32], block: &mut [f32], start: usize, len: usize, stride: usize, plane_len: usize) {
    if stride == 2 {
        // A tight pairwise loop; strided indexing would be much slower.
        let (even, odd) = block.split_at_mut(plane_len);
        let (even, odd) = (&mut even[start..][..len], &mut odd[start..][..len]);
        for ((e, o), pair) in even.iter_mut().zip(odd.iter_mut()).zip(prow.chunks_exact(2)) {
            *e = pair[0];
            *o = pair[1];
        }
    } else {
        for q in 0..stride {
            for (j, d) in block[q * plane_len + start..][..len].iter_mut().enumerate() {
                *d = prow[j * stride + q];
            }
        }
    }
}

/// `dst[i] = bias + Σ_t w[t] · src[offsets[t] + i]` over the whole wide run.
fn accumulate(dst: &mut [f32], src: &[f32], offsets: &[usize], w: &[f32], bias: f32) {
    let n = dst.len();
    if let ([w0, w1, w2, w3, w4, w5, w6, w7, w8], [o0, o1, o2, o3, o4, o5, o6, o7, o8]) = (w, offsets) {
        // 3×3, all nine taps fused: one pass, no intermediate stores. Slicing every run to
        // exactly `n` lets the compiler drop the bounds checks and vectorize.
        let tap = |o: usize| &src[o..][..n];
        let (r0, r1, r2, r3, r4, r5, r6, r7, r8) = (tap(*o0), tap(*o1), tap(*o2), tap(*o3), tap(*o4), tap(*o5), tap(*o6), tap(*o7), tap(*o8));
        for i in 0..n {
            let top = w0 * r0[i] + w1 * r1[i] + w2 * r2[i];
            let mid = w3 * r3[i] + w4 * r4[i] + w5 * r5[i];
            let bot = w6 * r6[i] + w7 * r7[i] + w8 * r8[i];
            dst[i] = bias + top + mid + bot;
        }
    } else {
        dst.fill(bias);
        for (&wv, &o) in w.iter().zip(offsets) {
            for (d, &v) in dst.iter_mut().zip(&src[o..o + n]) {
                *d += wv * v;
            }
        }
    }
}
