//! rbuild's fused int8 kernels against their float reference — dequantize, the float op in
//! f64, quantize (ties to even, clamped) — within 1 LSB, over random data with zero points at
//! the ends of the int8 range, saturating outputs and fused activation clamps.

use rbuild_kernels::portable::qint8::{self, quantize_multiplier};
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::ScalarType;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.next() as u8 as i8).collect()
    }
    fn unit(&mut self) -> f64 {
        self.next() as f64 / u32::MAX as f64
    }
}

/// The float reference's quantize: `clamp(round_half_even(y / s) + z, lo, hi)`.
fn quantize(y: f64, s: f32, z: i32, lo: i32, hi: i32) -> i32 {
    (((y / s as f64).round_ties_even()) as i64 + z as i64).clamp(lo as i64, hi as i64) as i32
}

fn assert_within_one_lsb(what: &str, got: &[i8], want: &[i32]) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    let mut off = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let d = (g as i32 - w).abs();
        assert!(d <= 1, "{what}: element {i}: int8 kernel {g}, float reference {w}");
        off += (d != 0) as usize;
    }
    // Off-by-one results are rounding ties; a systematic bias would show as many.
    assert!(off * 10 <= want.len().max(10), "{what}: {off} of {} elements differ by 1", want.len());
}

struct ConvCase {
    n: usize,
    c_in: usize,
    c_out: usize,
    hw: [usize; 2],
    k: [usize; 2],
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
    zin: i32,
    zout: i32,
    act: Option<(f64, f64)>,
    out_scale: f32,
}

fn run_conv(c: &ConvCase, rng: &mut Rng) {
    let what = format!(
        "qconv2d c_in {} c_out {} groups {} stride {} pad {} dil {} zin {} zout {}",
        c.c_in, c.c_out, c.groups, c.stride, c.padding, c.dilation, c.zin, c.zout
    );
    let cig = c.c_in / c.groups;
    let cog = c.c_out / c.groups;
    let x = rng.i8s(c.n * c.c_in * c.hw[0] * c.hw[1]);
    let w: Vec<i8> = rng.i8s(c.c_out * cig * c.k[0] * c.k[1]).into_iter().map(|v| v.max(-127)).collect();
    let sx = 0.02f32;
    let sw: Vec<f32> = (0..c.c_out).map(|_| 0.001 + 0.01 * rng.unit() as f32).collect();
    let bias_f: Vec<f32> = (0..c.c_out).map(|_| (rng.unit() as f32 - 0.5) * 2.0).collect();
    let bias: Vec<i32> = (0..c.c_out).map(|o| (bias_f[o] as f64 / (sx as f64 * sw[o] as f64)).round() as i32).collect();
    let (mut mult, mut shift) = (vec![0; c.c_out], vec![0; c.c_out]);
    for o in 0..c.c_out {
        (mult[o], shift[o]) = quantize_multiplier(sx as f64 * sw[o] as f64 / c.out_scale as f64);
    }
    let (lo, hi) = match c.act {
        Some((a, b)) => (quantize(a, c.out_scale, c.zout, -128, 127), quantize(b, c.out_scale, c.zout, -128, 127)),
        None => (-128, 127),
    };
    let eff = |i: usize| c.dilation * (c.k[i] - 1) + 1;
    let oh = (c.hw[0] + 2 * c.padding - eff(0)) / c.stride + 1;
    let ow = (c.hw[1] + 2 * c.padding - eff(1)) / c.stride + 1;

    let mut h = OpHarness::new();
    let xi = h.tensor(ScalarType::Char, &[c.n, c.c_in, c.hw[0], c.hw[1]], &x);
    let wi = h.tensor(ScalarType::Char, &[c.c_out, cig, c.k[0], c.k[1]], &w);
    let bi = h.tensor(ScalarType::Int, &[c.c_out], &bias);
    let mi = h.tensor(ScalarType::Int, &[c.c_out], &mult);
    let si = h.tensor(ScalarType::Int, &[c.c_out], &shift);
    let (zi, zo, l, u) = (h.int(c.zin as i64), h.int(c.zout as i64), h.int(lo as i64), h.int(hi as i64));
    let pair = |h: &mut OpHarness, v: usize| h.int_list(&[v as i64, v as i64]);
    let (st, pd, dl) = (pair(&mut h, c.stride), pair(&mut h, c.padding), pair(&mut h, c.dilation));
    let g = h.int(c.groups as i64);
    let out = h.out(ScalarType::Char, &[c.n, c.c_out, oh, ow]);
    h.call(qint8::qconv2d_out, &[xi, wi, bi, mi, si, zi, zo, l, u, st, pd, dl, g, out, out]).unwrap();
    let got = h.read::<i8>(out);

    let mut want = Vec::with_capacity(got.len());
    for b in 0..c.n {
        for o in 0..c.c_out {
            let ic0 = (o / cog) * cig;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut y = bias_f[o] as f64;
                    for ic in 0..cig {
                        for ky in 0..c.k[0] {
                            for kx in 0..c.k[1] {
                                let iy = (oy * c.stride + ky * c.dilation) as isize - c.padding as isize;
                                let ix = (ox * c.stride + kx * c.dilation) as isize - c.padding as isize;
                                if iy < 0 || ix < 0 || iy >= c.hw[0] as isize || ix >= c.hw[1] as isize {
                                    continue;
                                }
                                let xv = x[((b * c.c_in + ic0 + ic) * c.hw[0] + iy as usize) * c.hw[1] + ix as usize];
                                let wv = w[((o * cig + ic) * c.k[0] + ky) * c.k[1] + kx];
                                y += (xv as i32 - c.zin) as f64 * sx as f64 * (wv as f64 * sw[o] as f64);
                            }
                        }
                    }
                    if let Some((a, bnd)) = c.act {
                        y = y.clamp(a, bnd);
                    }
                    want.push(quantize(y, c.out_scale, c.zout, -128, 127));
                }
            }
        }
    }
    assert_within_one_lsb(&what, &got, &want);
}

#[test]
fn qconv2d_matches_float_reference() {
    let mut rng = Rng(1);
    let base = ConvCase {
        n: 1,
        c_in: 4,
        c_out: 6,
        hw: [7, 6],
        k: [3, 3],
        stride: 1,
        padding: 1,
        dilation: 1,
        groups: 1,
        zin: 3,
        zout: -5,
        act: None,
        out_scale: 0.05,
    };
    // Plain, strided + batch, depthwise with relu6, grouped + dilated, 1x1 with extreme zero
    // points, and a tiny output scale that saturates most outputs.
    run_conv(&base, &mut rng);
    run_conv(&ConvCase { n: 2, stride: 2, padding: 0, ..base }, &mut rng);
    run_conv(&ConvCase { c_in: 6, c_out: 6, groups: 6, act: Some((0.0, 6.0)), zout: -128, ..base }, &mut rng);
    run_conv(&ConvCase { c_in: 4, c_out: 4, groups: 2, dilation: 2, padding: 2, ..base }, &mut rng);
    run_conv(&ConvCase { k: [1, 1], padding: 0, zin: -128, zout: 127, ..base }, &mut rng);
    run_conv(&ConvCase { zin: 127, out_scale: 0.002, ..base }, &mut rng);
    run_conv(&ConvCase { act: Some((-0.5, 0.5)), ..base }, &mut rng);
}

#[test]
fn qlinear_matches_float_reference() {
    let mut rng = Rng(2);
    for &(rows, k, n, zin, zout, out_scale, act) in
        &[(1usize, 40usize, 10usize, 0i32, 0i32, 0.05f32, None), (3, 17, 5, -128, 27, 0.01, None), (2, 64, 8, 100, -128, 0.03, Some((0.0, f64::MAX)))]
    {
        let x = rng.i8s(rows * k);
        let w: Vec<i8> = rng.i8s(n * k).into_iter().map(|v| v.max(-127)).collect();
        let sx = 0.03f32;
        let sw: Vec<f32> = (0..n).map(|_| 0.001 + 0.004 * rng.unit() as f32).collect();
        let bias_f: Vec<f32> = (0..n).map(|_| rng.unit() as f32 - 0.5).collect();
        let bias: Vec<i32> = (0..n).map(|o| (bias_f[o] as f64 / (sx as f64 * sw[o] as f64)).round() as i32).collect();
        let (mut mult, mut shift) = (vec![0; n], vec![0; n]);
        for o in 0..n {
            (mult[o], shift[o]) = quantize_multiplier(sx as f64 * sw[o] as f64 / out_scale as f64);
        }
        let lo = if act.is_some() { zout } else { -128 };
        let mut h = OpHarness::new();
        let xi = h.tensor(ScalarType::Char, &[rows, k], &x);
        let wi = h.tensor(ScalarType::Char, &[n, k], &w);
        let bi = h.tensor(ScalarType::Int, &[n], &bias);
        let mi = h.tensor(ScalarType::Int, &[n], &mult);
        let si = h.tensor(ScalarType::Int, &[n], &shift);
        let (zi, zo, l, u) = (h.int(zin as i64), h.int(zout as i64), h.int(lo as i64), h.int(127));
        let out = h.out(ScalarType::Char, &[rows, n]);
        h.call(qint8::qlinear_out, &[xi, wi, bi, mi, si, zi, zo, l, u, out, out]).unwrap();
        let mut want = Vec::new();
        for r in 0..rows {
            for o in 0..n {
                let mut y = bias_f[o] as f64;
                for j in 0..k {
                    y += (x[r * k + j] as i32 - zin) as f64 * sx as f64 * (w[o * k + j] as f64 * sw[o] as f64);
                }
                if act.is_some() {
                    y = y.max(0.0);
                }
                want.push(quantize(y, out_scale, zout, -128, 127));
            }
        }
        assert_within_one_lsb(&format!("qlinear {rows}x{k}x{n}"), &h.read::<i8>(out), &want);
    }
}

#[test]
fn qadd_and_qmul_match_float_reference() {
    let mut rng = Rng(3);
    // (scale a, zp a, scale b, zp b, scale out, zp out)
    let cases = [(0.0213f32, 0i32, 0.0297f32, 5i32, 0.0411f32, -3i32), (0.1, -128, 0.001, 127, 0.05, 0), (0.05, 10, 0.05, 10, 0.005, 127)];
    for &(sa, za, sb, zb, so, zo) in &cases {
        let n = 300;
        let (a, b) = (rng.i8s(n), rng.i8s(n));
        // add, TFLite parameters as fuse_int8 computes them.
        let twice = 2.0 * (sa as f64).max(sb as f64);
        let (ma, sha) = quantize_multiplier(sa as f64 / twice);
        let (mb, shb) = quantize_multiplier(sb as f64 / twice);
        let (mo, sho) = quantize_multiplier(twice / ((1u64 << 20) as f64 * so as f64));
        let mut h = OpHarness::new();
        let ai = h.tensor(ScalarType::Char, &[3, n / 3], &a);
        let bi = h.tensor(ScalarType::Char, &[3, n / 3], &b);
        let ints: Vec<u32> = [za as i64, ma as i64, sha as i64, zb as i64, mb as i64, shb as i64, 20, zo as i64, mo as i64, sho as i64, -128, 127]
            .iter()
            .map(|&v| h.int(v))
            .collect();
        let out = h.out(ScalarType::Char, &[3, n / 3]);
        let mut ids = vec![ai, bi];
        ids.extend(&ints);
        ids.extend([out, out]);
        h.call(qint8::qadd_out, &ids).unwrap();
        let want: Vec<i32> = (0..n)
            .map(|i| quantize((a[i] as i32 - za) as f64 * sa as f64 + (b[i] as i32 - zb) as f64 * sb as f64, so, zo, -128, 127))
            .collect();
        assert_within_one_lsb(&format!("qadd {sa}/{za} {sb}/{zb} -> {so}/{zo}"), &h.read::<i8>(out), &want);

        let (m, s) = quantize_multiplier(sa as f64 * sb as f64 / (so as f64 * 0.1));
        let mut h = OpHarness::new();
        let ai = h.tensor(ScalarType::Char, &[n], &a);
        let bi = h.tensor(ScalarType::Char, &[n], &b);
        let ints: Vec<u32> = [za as i64, zb as i64, zo as i64, m as i64, s as i64, -100, 100].iter().map(|&v| h.int(v)).collect();
        let out = h.out(ScalarType::Char, &[n]);
        let mut ids = vec![ai, bi];
        ids.extend(&ints);
        ids.extend([out, out]);
        h.call(qint8::qmul_out, &ids).unwrap();
        let want: Vec<i32> = (0..n)
            .map(|i| quantize((a[i] as i32 - za) as f64 * sa as f64 * ((b[i] as i32 - zb) as f64 * sb as f64), so * 0.1, zo, -100, 100))
            .collect();
        assert_within_one_lsb(&format!("qmul {sa}/{za} {sb}/{zb}"), &h.read::<i8>(out), &want);
    }
}

#[test]
fn qmean_hw_matches_float_reference() {
    let mut rng = Rng(4);
    for &(c, hw, zin, zout, si, so) in &[(5usize, 49usize, 7i32, 7i32, 0.05f32, 0.05f32), (3, 9, -128, 30, 0.1, 0.01), (2, 4, 127, -128, 0.02, 0.08)] {
        let x = rng.i8s(c * hw);
        let (m, s) = quantize_multiplier(si as f64 / (so as f64 * hw as f64));
        let mut h = OpHarness::new();
        let side = (hw as f64).sqrt() as usize;
        let xi = h.tensor(ScalarType::Char, &[1, c, side, hw / side], &x);
        let ints: Vec<u32> = [zin as i64, zout as i64, m as i64, s as i64, -128, 127].iter().map(|&v| h.int(v)).collect();
        let out = h.out(ScalarType::Char, &[1, c, 1, 1]);
        let mut ids = vec![xi];
        ids.extend(&ints);
        ids.extend([out, out]);
        h.call(qint8::qmean_hw_out, &ids).unwrap();
        let want: Vec<i32> = x
            .chunks(hw)
            .map(|p| quantize(p.iter().map(|&v| (v as i32 - zin) as f64 * si as f64).sum::<f64>() / hw as f64, so, zout, -128, 127))
            .collect();
        assert_within_one_lsb("qmean_hw", &h.read::<i8>(out), &want);
    }
}

#[test]
fn qpools_match_float_reference() {
    let mut rng = Rng(5);
    let (c, hgt, wid) = (3usize, 7usize, 6usize);
    let x = rng.i8s(c * hgt * wid);
    for &(k, stride, pad) in &[(3usize, 2usize, 1usize), (2, 2, 0), (3, 1, 0)] {
        let oh = (hgt + 2 * pad - k) / stride + 1;
        let ow = (wid + 2 * pad - k) / stride + 1;
        let window = |p: usize, oy: usize, ox: usize| -> Vec<Option<i8>> {
            let mut v = Vec::new();
            for ky in 0..k {
                for kx in 0..k {
                    let (iy, ix) = ((oy * stride + ky) as isize - pad as isize, (ox * stride + kx) as isize - pad as isize);
                    v.push((iy >= 0 && ix >= 0 && iy < hgt as isize && ix < wid as isize).then(|| x[(p * hgt + iy as usize) * wid + ix as usize]));
                }
            }
            v
        };
        // max: exact (no requantization), clamped to [-20, 90].
        let mut h = OpHarness::new();
        let xi = h.tensor(ScalarType::Char, &[1, c, hgt, wid], &x);
        let (ks, st, pd) = (h.int_list(&[k as i64; 2]), h.int_list(&[stride as i64; 2]), h.int_list(&[pad as i64; 2]));
        let (lo, hi) = (h.int(-20), h.int(90));
        let out = h.out(ScalarType::Char, &[1, c, oh, ow]);
        h.call(qint8::qmax_pool2d_out, &[xi, ks, st, pd, lo, hi, out, out]).unwrap();
        let mut want = Vec::new();
        for p in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    want.push(window(p, oy, ox).into_iter().flatten().map(i32::from).max().unwrap().clamp(-20, 90));
                }
            }
        }
        let got: Vec<i32> = h.read::<i8>(out).into_iter().map(i32::from).collect();
        assert_eq!(got, want, "qmax_pool2d k{k} s{stride} p{pad}");

        // avg, count_include_pad: padding is real zero.
        let (zin, zout, si, so) = (-9i32, 4i32, 0.04f32, 0.03f32);
        let (m, s) = quantize_multiplier(si as f64 / (so as f64 * (k * k) as f64));
        let mut h = OpHarness::new();
        let xi = h.tensor(ScalarType::Char, &[1, c, hgt, wid], &x);
        let (ks, st, pd) = (h.int_list(&[k as i64; 2]), h.int_list(&[stride as i64; 2]), h.int_list(&[pad as i64; 2]));
        let ints: Vec<u32> = [zin as i64, zout as i64, m as i64, s as i64, -128, 127].iter().map(|&v| h.int(v)).collect();
        let out = h.out(ScalarType::Char, &[1, c, oh, ow]);
        let mut ids = vec![xi, ks, st, pd];
        ids.extend(&ints);
        ids.extend([out, out]);
        h.call(qint8::qavg_pool2d_out, &ids).unwrap();
        let mut want = Vec::new();
        for p in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let sum: f64 = window(p, oy, ox).into_iter().flatten().map(|v| (v as i32 - zin) as f64 * si as f64).sum();
                    want.push(quantize(sum / (k * k) as f64, so, zout, -128, 127));
                }
            }
        }
        assert_within_one_lsb(&format!("qavg_pool2d k{k} s{stride} p{pad}"), &h.read::<i8>(out), &want);
    }
}

#[test]
fn qlookup_maps_every_code() {
    let table: Vec<i8> = (0..256).map(|i| (255 - i) as u8 as i8).collect();
    let x: Vec<i8> = (-128..=127).collect();
    let mut h = OpHarness::new();
    let xi = h.tensor(ScalarType::Char, &[256], &x);
    let ti = h.tensor(ScalarType::Char, &[256], &table);
    let out = h.out(ScalarType::Char, &[256]);
    h.call(qint8::qlookup_out, &[xi, ti, out, out]).unwrap();
    let got = h.read::<i8>(out);
    for (i, &v) in x.iter().enumerate() {
        assert_eq!(got[i], table[(v as i32 + 128) as usize]);
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let mut h = OpHarness::new();
    let x = h.tensor(ScalarType::Char, &[1, 2, 3, 3], &[0i8; 18]);
    let w = h.tensor(ScalarType::Char, &[2, 2, 3, 3], &[0i8; 36]);
    let short = h.tensor(ScalarType::Int, &[1], &[0i32]);
    let ok = h.tensor(ScalarType::Int, &[2], &[0i32, 0]);
    let (z, bad_z) = (h.int(0), h.int(300));
    let (lo, hi) = (h.int(-128), h.int(127));
    let l = h.int_list(&[1, 1]);
    let g = h.int(1);
    let out = h.out(ScalarType::Char, &[1, 2, 3, 3]);
    let e = h.call(qint8::qconv2d_out, &[x, w, short, ok, ok, z, z, lo, hi, l, l, l, g, out, out]).unwrap_err();
    assert!(e.to_string().contains("int32 with 2 elements"), "{e}");
    let e = h.call(qint8::qconv2d_out, &[x, w, ok, ok, ok, bad_z, z, lo, hi, l, l, l, g, out, out]).unwrap_err();
    assert!(e.to_string().contains("zero point 300"), "{e}");
    let f = h.f32(&[1, 2, 3, 3], &[0.0; 18]);
    let e = h.call(qint8::qconv2d_out, &[f, w, ok, ok, ok, z, z, lo, hi, l, l, l, g, out, out]).unwrap_err();
    assert!(e.to_string().contains("must be int8"), "{e}");
}

#[test]
fn qmul_broadcasts_a_per_channel_factor() {
    let mut rng = Rng(6);
    let (n, c, hw) = (2usize, 3usize, 10usize);
    let (a, b) = (rng.i8s(n * c * hw), rng.i8s(n * c));
    let (sa, za, sb, zb, so, zo) = (0.0311f32, 4i32, 0.00397f32, -128i32, 0.0523f32, -7i32);
    let (m, s) = quantize_multiplier(sa as f64 * sb as f64 / so as f64);
    let mut h = OpHarness::new();
    let ai = h.tensor(ScalarType::Char, &[n, c, 2, 5], &a);
    let bi = h.tensor(ScalarType::Char, &[n, c, 1, 1], &b);
    let ints: Vec<u32> = [za as i64, zb as i64, zo as i64, m as i64, s as i64, -128, 127].iter().map(|&v| h.int(v)).collect();
    let out = h.out(ScalarType::Char, &[n, c, 2, 5]);
    let mut ids = vec![ai, bi];
    ids.extend(&ints);
    ids.extend([out, out]);
    h.call(qint8::qmul_out, &ids).unwrap();
    let want: Vec<i32> =
        (0..a.len()).map(|i| quantize((a[i] as i32 - za) as f64 * sa as f64 * ((b[i / hw] as i32 - zb) as f64 * sb as f64), so, zo, -128, 127)).collect();
    assert_within_one_lsb("qmul per-channel", &h.read::<i8>(out), &want);
}
