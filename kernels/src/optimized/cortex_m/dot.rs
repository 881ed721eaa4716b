//! 1×1 convolution and linear layers as int8 dot products on `SXTB16`/`SMLAD` (two outputs ×
//! two pixels per inner loop, four bytes of the reduction per step).

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use super::dsp::{smlad, sxtb16, sxtb16_ror8};
use crate::portable::qint8::{self, channel_requant, int8_input, int8_out, to_int8, ChannelRequant};

/// Pixels transposed at a time: a tile of `TILE × C_in` bytes (≤ 16 KiB for MobileNetV2's
/// widest 960 channels) instead of a copy of the whole input.
const TILE: usize = 16;

/// The output requantization of one layer.
struct Requant<'a> {
    bias: Vec<i32>,
    mult: &'a [i32],
    shift: &'a [i32],
    zout: i32,
    lo: i32,
    hi: i32,
}

impl Requant<'_> {
    #[inline(always)]
    fn out(&self, c: usize, dot: i32) -> i8 {
        to_int8(
            dot.wrapping_add(self.bias[c]),
            self.mult[c],
            self.shift[c],
            self.zout,
            self.lo,
            self.hi,
        )
    }
}

/// `bias − z·Σw` per output: the input zero point folded out of the inner loop (exact in
/// wrapping i32, as the portable kernel's `Σ (x − z)·w`).
fn fold_bias(bias: &[i32], w: &[i8], k: usize, zin: i32) -> Vec<i32> {
    bias.iter()
        .zip(w.chunks_exact(k.max(1)))
        .map(|(&b, row)| {
            b.wrapping_sub(zin.wrapping_mul(row.iter().map(|&v| v as i32).sum::<i32>()))
        })
        .collect()
}

#[inline(always)]
fn word(s: &[i8], i: usize) -> u32 {
    let b: [i8; 4] = s[i..i + 4].try_into().expect("4 bytes");
    u32::from_le_bytes(b.map(|v| v as u8))
}

/// `Σ_i xs[a][i] · ws[b][i]` for every (a, b); every slice holds `k4` bytes, k4 % 4 == 0.
#[inline(always)]
fn dots<const A: usize, const B: usize>(
    xs: [&[i8]; A],
    ws: [&[i8]; B],
    k4: usize,
) -> [[i32; B]; A] {
    let mut acc = [[0i32; B]; A];
    let mut i = 0;
    while i < k4 {
        let (mut xe, mut xo) = ([0u32; A], [0u32; A]);
        for a in 0..A {
            let v = word(xs[a], i);
            (xe[a], xo[a]) = (sxtb16(v), sxtb16_ror8(v));
        }
        for b in 0..B {
            let v = word(ws[b], i);
            let (we, wo) = (sxtb16(v), sxtb16_ror8(v));
            for a in 0..A {
                acc[a][b] = smlad(xo[a], wo, smlad(xe[a], we, acc[a][b]));
            }
        }
        i += 4;
    }
    acc
}

/// `rows` vectors of `k` int8 padded with zeros to a multiple of 4 (zeros add nothing).
fn padded_rows(src: &[i8], rows: usize, k: usize) -> (Vec<i8>, usize) {
    let k4 = k.div_ceil(4) * 4;
    let mut v = vec![0i8; rows * k4];
    for (d, s) in v
        .chunks_exact_mut(k4.max(1))
        .zip(src.chunks_exact(k.max(1)))
    {
        d[..k].copy_from_slice(s);
    }
    (v, k4)
}

/// Output channels in pairs (and a last single one) against `t` input vectors of `xs`.
fn channels_by_pixels(
    xs: &[i8],
    t: usize,
    w: &[i8],
    c_out: usize,
    k4: usize,
    rq: &Requant<'_>,
    mut put: impl FnMut(usize, usize, i8),
) {
    let x = |j: usize| &xs[j * k4..(j + 1) * k4];
    let wr = |c: usize| &w[c * k4..(c + 1) * k4];
    let mut c = 0;
    while c + 2 <= c_out {
        let mut j = 0;
        while j + 2 <= t {
            let d = dots([x(j), x(j + 1)], [wr(c), wr(c + 1)], k4);
            for (a, row) in d.iter().enumerate() {
                put(c, j + a, rq.out(c, row[0]));
                put(c + 1, j + a, rq.out(c + 1, row[1]));
            }
            j += 2;
        }
        if j < t {
            let [d] = dots([x(j)], [wr(c), wr(c + 1)], k4);
            put(c, j, rq.out(c, d[0]));
            put(c + 1, j, rq.out(c + 1, d[1]));
        }
        c += 2;
    }
    if c < c_out {
        for j in 0..t {
            let [[d]] = dots([x(j)], [wr(c)], k4);
            put(c, j, rq.out(c, d));
        }
    }
}

/// `rbuild::qconv2d.out`: 1×1, stride 1, no padding, groups 1 here; other shapes (and every
/// argument error) go to the portable kernel.
pub fn qconv2d_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qconv2d";
    let pointwise = || -> Option<bool> {
        let w = args.tensor(1).ok()?;
        let ones = |i: usize, v: i64| args.int_list(i).ok().map(|l| l.iter().all(|&e| e == v));
        Some(
            matches!(w.sizes(), &[_, _, 1, 1])
                && args.int(12).ok()? == 1
                && ones(9, 1)?
                && ones(10, 0)?
                && ones(11, 1)?,
        )
    };
    if pointwise() != Some(true) {
        return qint8::qconv2d_out(ctx, args);
    }
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let (w, wd) = int8_input(args, 1, WHAT)?;
    let (&[n, c_in, h, wi], &[c_out, cig, 1, 1]) = (x.sizes(), w.sizes()) else {
        return qint8::qconv2d_out(ctx, args);
    };
    if cig != c_in {
        return qint8::qconv2d_out(ctx, args);
    }
    let ChannelRequant { bias, mult, shift, zin, zout, lo, hi } = channel_requant(args, c_out, WHAT)?;
    let mut out = int8_out(args, 13, &[n, c_out, h, wi], WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    let rq = Requant {
        bias: fold_bias(bias, wd, c_in, zin),
        mult,
        shift,
        zout,
        lo,
        hi,
    };
    let (wp, k4) = padded_rows(wd, c_out, c_in);
    let plane = h * wi;
    let mut xt = vec![0i8; TILE * k4];
    for b in 0..n {
        let xb = &xd[b * c_in * plane..(b + 1) * c_in * plane];
        let ob = &mut od[b * c_out * plane..(b + 1) * c_out * plane];
        let mut p0 = 0;
        while p0 < plane {
            let t = TILE.min(plane - p0);
            // NCHW → pixel-major tile, so each pixel's channels are contiguous bytes.
            for (ic, src) in xb.chunks_exact(plane).enumerate() {
                for (j, &v) in src[p0..p0 + t].iter().enumerate() {
                    xt[j * k4 + ic] = v;
                }
            }
            channels_by_pixels(&xt, t, &wp, c_out, k4, &rq, |c, j, v| {
                ob[c * plane + p0 + j] = v
            });
            p0 += t;
        }
    }
    Ok(())
}

/// `rbuild::qlinear.out`: int8 `[.., K]` input rows against `[N, K]` weights.
pub fn qlinear_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qlinear";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let (w, wd) = int8_input(args, 1, WHAT)?;
    let (&[n_out, k], Some(&xk)) = (w.sizes(), x.sizes().last()) else {
        return qint8::qlinear_out(ctx, args);
    };
    if xk != k || k == 0 {
        return qint8::qlinear_out(ctx, args);
    }
    let ChannelRequant { bias, mult, shift, zin, zout, lo, hi } = channel_requant(args, n_out, WHAT)?;
    let mut sizes = x.sizes().to_vec();
    *sizes.last_mut().expect("checked above") = n_out;
    let mut out = int8_out(args, 9, &sizes, WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    let rq = Requant {
        bias: fold_bias(bias, wd, k, zin),
        mult,
        shift,
        zout,
        lo,
        hi,
    };
    let rows = x.numel() / k;
    let (wp, k4) = padded_rows(wd, n_out, k);
    let (xp, _) = padded_rows(xd, rows, k);
    channels_by_pixels(&xp, rows, &wp, n_out, k4, &rq, |c, r, v| {
        od[r * n_out + c] = v
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    use crate::portable::qint8::{self as portable, quantize_multiplier};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
        fn i8s(&mut self, n: usize) -> Vec<i8> {
            (0..n).map(|_| self.next() as u8 as i8).collect()
        }
        fn range(&mut self, lo: i32, hi: i32) -> i32 {
            lo + (self.next() % (hi - lo + 1) as u32) as i32
        }
    }

    /// Requantization parameters that map the accumulator range of `k` products onto int8.
    fn params(r: &mut Rng, n: usize, k: usize) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
        let bias = (0..n).map(|_| r.range(-5000, 5000)).collect();
        let (mut m, mut s) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let real = (0.5 + (r.next() % 1000) as f64 / 1000.0) / (k as f64 * 64.0).sqrt() / 16.0;
            let (mm, ss) = quantize_multiplier(real);
            m.push(mm);
            s.push(ss);
        }
        (bias, m, s)
    }

    fn conv(
        kernel: KernelFn,
        x: &[i8],
        xs: [usize; 4],
        w: &[i8],
        ws: [usize; 4],
        p: &(Vec<i32>, Vec<i32>, Vec<i32>),
        z: (i64, i64, i64, i64),
        geo: [i64; 4],
    ) -> Vec<i8> {
        let mut h = OpHarness::new();
        let xi = h.tensor(ScalarType::Char, &xs, x);
        let wi = h.tensor(ScalarType::Char, &ws, w);
        let (b, m, s) = (
            h.tensor(ScalarType::Int, &[ws[0]], &p.0),
            h.tensor(ScalarType::Int, &[ws[0]], &p.1),
            h.tensor(ScalarType::Int, &[ws[0]], &p.2),
        );
        let (zi, zo, lo, hi) = (h.int(z.0), h.int(z.1), h.int(z.2), h.int(z.3));
        let [stride, pad, dil, groups] = geo;
        let (st, pd, dl, g) = (
            h.int_list(&[stride, stride]),
            h.int_list(&[pad, pad]),
            h.int_list(&[dil, dil]),
            h.int(groups),
        );
        let span = |d: usize| {
            (d + 2 * pad as usize - (dil as usize * (ws[2] - 1) + 1)) / stride as usize + 1
        };
        let out = h.out(ScalarType::Char, &[xs[0], ws[0], span(xs[2]), span(xs[3])]);
        h.call(
            kernel,
            &[xi, wi, b, m, s, zi, zo, lo, hi, st, pd, dl, g, out, out],
        )
        .unwrap();
        h.read::<i8>(out)
    }

    #[test]
    fn qconv2d_matches_portable_bit_for_bit() {
        let mut r = Rng(7);
        // (n, c_in, hw, c_out, k, stride, pad, groups): pointwise with odd/even pixels, channel
        // tails (c_in % 4, odd c_out), then shapes that take the portable path.
        let cases = [
            (1, 16, 5, 8, 1, 1, 0, 1),
            (1, 3, 4, 5, 1, 1, 0, 1),
            (2, 7, 3, 3, 1, 1, 0, 1),
            (1, 32, 17, 96, 1, 1, 0, 1),
            (1, 1, 1, 1, 1, 1, 0, 1),
            (1, 8, 6, 4, 3, 2, 1, 1),
            (1, 8, 6, 8, 3, 1, 1, 8),
            (1, 8, 6, 4, 1, 2, 0, 1),
        ];
        for (n, c_in, hw, c_out, k, stride, pad, groups) in cases {
            let x = r.i8s(n * c_in * hw * hw);
            let ws = [c_out, c_in / groups, k, k];
            let w = r.i8s(ws.iter().product());
            let p = params(&mut r, c_out, c_in * k * k);
            for z in [(0, 0, -128, 127), (-128, 5, -128, 127), (37, -20, -20, 100)] {
                let geo = [stride as i64, pad as i64, 1, groups as i64];
                let run = |f: KernelFn| conv(f, &x, [n, c_in, hw, hw], &w, ws, &p, z, geo);
                let (want, got) = (run(portable::qconv2d_out), run(super::qconv2d_out));
                assert_eq!(got, want, "{}", format!("n={n} c_in={c_in} hw={hw} c_out={c_out} k={k} stride={stride} groups={groups} z={z:?}"));
            }
        }
    }

    #[test]
    fn qlinear_matches_portable_bit_for_bit() {
        let mut r = Rng(11);
        for (rows, k, n) in [(1, 1280, 10), (3, 5, 7), (2, 64, 1), (1, 3, 2)] {
            let x = r.i8s(rows * k);
            let w = r.i8s(n * k);
            let p = params(&mut r, n, k);
            for z in [(0i64, 0i64, -128i64, 127i64), (-3, 9, 0, 127)] {
                let run = |f: KernelFn| {
                    let mut h = OpHarness::new();
                    let xi = h.tensor(ScalarType::Char, &[rows, k], &x);
                    let wi = h.tensor(ScalarType::Char, &[n, k], &w);
                    let (b, m, s) = (
                        h.tensor(ScalarType::Int, &[n], &p.0),
                        h.tensor(ScalarType::Int, &[n], &p.1),
                        h.tensor(ScalarType::Int, &[n], &p.2),
                    );
                    let (zi, zo, lo, hi) = (h.int(z.0), h.int(z.1), h.int(z.2), h.int(z.3));
                    let out = h.out(ScalarType::Char, &[rows, n]);
                    h.call(f, &[xi, wi, b, m, s, zi, zo, lo, hi, out, out])
                        .unwrap();
                    h.read::<i8>(out)
                };
                assert_eq!(
                    run(super::qlinear_out),
                    run(portable::qlinear_out),
                    "rows={rows} k={k} n={n} z={z:?}"
                );
            }
        }
    }

    #[test]
    fn bad_arguments_get_the_portable_errors() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Float, &[1, 4], &[0f32; 4]);
        let w = h.tensor(ScalarType::Char, &[2, 4], &[0i8; 8]);
        let b = h.tensor(ScalarType::Int, &[2], &[0i32; 2]);
        let (zi, zo, lo, hi) = (h.int(0), h.int(0), h.int(-128), h.int(127));
        let out = h.out(ScalarType::Char, &[1, 2]);
        let e = h
            .call(
                super::qlinear_out,
                &[x, w, b, b, b, zi, zo, lo, hi, out, out],
            )
            .unwrap_err();
        assert!(
            format!("{e}").contains("rbuild::qlinear") && format!("{e}").contains("int8"),
            "{e}"
        );
    }
}
