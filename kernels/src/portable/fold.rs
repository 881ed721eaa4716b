//! `col2im.out` (`torch.nn.functional.fold`): summing sliding blocks back into an image.
//!
//! The input holds one column per block position, `[N, C * kh * kw, L]` (or unbatched
//! `[C * kh * kw, L]`); every column element is added to the image pixel its kernel offset
//! covers, so overlapping blocks sum and pixels of the padding are dropped. Checks and
//! messages follow PyTorch's `col2im_shape_check`; sums run in f64 and round once.

use alloc::vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::kerr;

use super::conv::tap;
use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::col2im.out" => col2im_out,
}

/// Reads an `int[2]` argument whose values must all be at least `min`.
fn pair(args: &KernelArgs<'_>, i: usize, what: &str, min: i64) -> KernelResult<[usize; 2]> {
    let v = args.int_list(i)?;
    match v.as_slice() {
        &[a, b] if a >= min && b >= min => Ok([a as usize, b as usize]),
        &[_, _] => Err(kerr!("col2im: {what} {v:?} must be >= {min}")),
        _ => Err(kerr!("col2im: {what} must have 2 values, got {v:?}")),
    }
}

/// `col2im.out(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation,
/// int[2] padding, int[2] stride, *, Tensor(a!) out)`: args = [self, output_size,
/// kernel_size, dilation, padding, stride, out, out].
pub fn col2im_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let input = args.tensor(0)?;
    let out_hw = pair(args, 1, "output_size", 0)?;
    let kernel = pair(args, 2, "kernel_size", 1)?;
    let dilation = pair(args, 3, "dilation", 1)?;
    let padding = pair(args, 4, "padding", 0)?;
    let stride = pair(args, 5, "stride", 1)?;
    if !input.dtype.is_floating() {
        return Err(kerr!("col2im: input must be a floating tensor, got {}", input.dtype));
    }
    require_contiguous(&input, "col2im input")?;
    let (batch, rows, length, batched) = match *input.sizes() {
        [r, l] if r > 0 && l > 0 => (1, r, l, false),
        [n, r, l] if r > 0 && l > 0 => (n, r, l, true),
        _ => {
            return Err(kerr!(
                "col2im: expected a 2-D or 3-D (batch mode) input with non-zero dimensions (batch may be 0), got {:?}",
                input.sizes()
            ))
        }
    };
    let taps = kernel[0] * kernel[1];
    if rows % taps != 0 {
        return Err(kerr!(
            "col2im: size of input's dimension {} ({rows}) must be divisible by the product of kernel_size {kernel:?}",
            input.dim() - 2
        ));
    }
    let channels = rows / taps;
    // Block positions per axis (PyTorch rounds the division toward negative infinity).
    let mut blocks = [0usize; 2];
    for d in 0..2 {
        let span = (dilation[d] as i128) * (kernel[d] as i128 - 1) + 1;
        let room = out_hw[d] as i128 + 2 * padding[d] as i128 - span;
        let count = room.div_euclid(stride[d] as i128) + 1;
        if count < 1 {
            return Err(kerr!(
                "col2im: output_size {out_hw:?} with kernel_size {kernel:?}, dilation {dilation:?}, padding {padding:?} and \
                 stride {stride:?} leaves no room for a sliding block"
            ));
        }
        blocks[d] = usize::try_from(count).map_err(|_| kerr!("col2im: too many sliding blocks"))?;
    }
    if blocks[0].checked_mul(blocks[1]) != Some(length) {
        return Err(kerr!(
            "col2im: output_size {out_hw:?} gives {} x {} sliding blocks, but input's last dimension is {length}",
            blocks[0],
            blocks[1]
        ));
    }
    let mut out = args.out(6)?;
    if out.dtype != input.dtype {
        return Err(kerr!("col2im: out dtype {} differs from input dtype {}", out.dtype, input.dtype));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("col2im: out must be contiguous"));
    }
    let out_sizes = if batched {
        vec![batch, channels, out_hw[0], out_hw[1]]
    } else {
        vec![channels, out_hw[0], out_hw[1]]
    };
    let plane = out_hw[0]
        .checked_mul(out_hw[1])
        .filter(|p| p.checked_mul(channels * batch).is_some())
        .ok_or_else(|| kerr!("col2im: output {out_sizes:?} is too large"))?;
    let mut sums = vec![0.0f64; batch * channels * plane];
    let x = Elems::of(&input)?;
    for b in 0..batch {
        for row in 0..rows {
            let (c, kx, ky) = (row / taps, row % kernel[1], (row / kernel[1]) % kernel[0]);
            let image = (b * channels + c) * plane;
            let column = (b * rows + row) * length;
            for by in 0..blocks[0] {
                let Some(y) = tap(by * stride[0], ky, dilation[0], padding[0], out_hw[0]) else { continue };
                for bx in 0..blocks[1] {
                    let Some(xx) = tap(bx * stride[1], kx, dilation[1], padding[1], out_hw[1]) else { continue };
                    sums[image + y * out_hw[1] + xx] += x.f64(column + by * blocks[1] + bx);
                }
            }
        }
    }
    out.resize(&out_sizes)?;
    let mut o = ElemsMut::of(&mut out)?;
    for (i, &v) in sums.iter().enumerate() {
        o.set_f64(i, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    /// Calls col2im on an f32 input; returns the output values or the error message.
    fn fold(input: &[f32], in_sizes: &[usize], params: [&[i64]; 5], out_sizes: &[usize]) -> Result<Vec<f32>, alloc::string::String> {
        let mut h = OpHarness::new();
        let x = h.f32(in_sizes, input);
        let [size, k, d, p, s] = params.map(|v| h.int_list(v));
        let out = h.out(ScalarType::Float, out_sizes);
        h.call(col2im_out, &[x, size, k, d, p, s, out, out]).map_err(|e| e.message)?;
        Ok(h.read::<f32>(out))
    }

    /// im2col of a [C, H, W] image: rows (c, ky, kx), columns block positions (row-major).
    fn im2col(img: &[f32], [c, h, w]: [usize; 3], k: usize, stride: usize, pad: usize) -> (Vec<f32>, usize) {
        let (bh, bw) = ((h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
        let mut cols = Vec::new();
        for ch in 0..c {
            for ky in 0..k {
                for kx in 0..k {
                    for by in 0..bh {
                        for bx in 0..bw {
                            let (y, x) = ((by * stride + ky) as i64 - pad as i64, (bx * stride + kx) as i64 - pad as i64);
                            let inside = y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w;
                            cols.push(if inside { img[(ch * h + y as usize) * w + x as usize] } else { 0.0 });
                        }
                    }
                }
            }
        }
        (cols, bh * bw)
    }

    #[test]
    fn col2im_of_im2col_multiplies_by_the_cover_count() {
        // 3x3 image, 2x2 kernel, stride 1: pixel (y, x) is covered by (#rows) x (#cols)
        // blocks: corners once, edges twice, the centre four times.
        let img: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let (cols, l) = im2col(&img, [1, 3, 3], 2, 1, 0);
        let got = fold(&cols, &[4, l], [&[3, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1]], &[1, 3, 3]).unwrap();
        let cover = [1., 2., 1., 2., 4., 2., 1., 2., 1.];
        let want: Vec<f32> = img.iter().zip(cover).map(|(v, c)| v * c).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn batched_padded_strided_and_dilated() {
        // Batch of 2, 2 channels, 4x5 image, 3x3 kernel, padding 1, stride 2: windows overlap
        // on one row/column; padding pixels are dropped.
        let (c, h, w) = (2, 4, 5);
        let imgs: Vec<Vec<f32>> = (0..2).map(|b| (0..c * h * w).map(|i| (i + 100 * b) as f32).collect()).collect();
        let mut cols = Vec::new();
        let mut l = 0;
        for img in &imgs {
            let (cl, n) = im2col(img, [c, h, w], 3, 2, 1);
            cols.extend(cl);
            l = n;
        }
        let got = fold(&cols, &[2, c * 9, l], [&[4, 5], &[3, 3], &[1, 1], &[1, 1], &[2, 2]], &[2, 2, 4, 5]).unwrap();
        // Rows covered by windows starting at -1, 1: row 1 twice; columns -1, 1, 3: 1 and 3 twice.
        let row_cover = [1., 2., 1., 1.];
        let col_cover = [1., 2., 1., 2., 1.];
        for (b, img) in imgs.iter().enumerate() {
            for (i, &v) in img.iter().enumerate() {
                let (y, x) = ((i / w) % h, i % w);
                assert_eq!(got[b * c * h * w + i], v * row_cover[y] * col_cover[x], "b{b} i{i}");
            }
        }
        // Dilation 2 with a 2x2 kernel on a 1x3 output: taps at columns j and j + 2.
        let got = fold(&[1., 10.], &[2, 1], [&[1, 3], &[1, 2], &[1, 2], &[0, 0], &[1, 1]], &[1, 1, 3]).unwrap();
        assert_eq!(got, vec![1., 0., 10.]);
    }

    #[test]
    fn double_and_empty_batch() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Double, &[1, 4, 1], &[1f64, 2., 3., 4.]);
        let params: [&[i64]; 5] = [&[2, 2], &[2, 2], &[1, 1], &[0, 0], &[1, 1]];
        let [size, k, d, p, s] = params.map(|v| h.int_list(v));
        let out = h.out(ScalarType::Double, &[1, 1, 2, 2]);
        h.call(col2im_out, &[x, size, k, d, p, s, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), vec![1., 2., 3., 4.]);
        let x = h.f32(&[0, 4, 1], &[]);
        let out = h.out(ScalarType::Float, &[0, 1, 2, 2]);
        h.call(col2im_out, &[x, size, k, d, p, s, out, out]).unwrap();
    }

    #[test]
    fn bad_arguments_are_errors() {
        let ok: [&[i64]; 5] = [&[2, 2], &[2, 2], &[1, 1], &[0, 0], &[1, 1]];
        let x = [0f32; 16];
        let err = |sizes: &[usize], params: [&[i64]; 5]| fold(&x[..sizes.iter().product()], sizes, params, &[1, 2, 2]).unwrap_err();
        assert!(err(&[3, 1], ok).contains("divisible"));
        assert!(err(&[1, 0, 4], ok).contains("non-zero"));
        assert!(err(&[2, 3], [&[2, 2], &[1, 2], &[1, 1], &[0, 0], &[1, 1]]).contains("sliding blocks"));
        assert!(err(&[4, 1], [&[2, 2], &[0, 2], &[1, 1], &[0, 0], &[1, 1]]).contains("kernel_size"));
        assert!(err(&[4, 1], [&[2, 2], &[2, 2], &[1, 1], &[-1, 0], &[1, 1]]).contains("padding"));
        assert!(err(&[4, 1], [&[2, 2], &[2, 2], &[1, 1], &[0, 0], &[0, 1]]).contains("stride"));
        assert!(err(&[4, 1], [&[2, 2], &[2, 2], &[0, 1], &[0, 0], &[1, 1]]).contains("dilation"));
        assert!(err(&[4, 1], [&[2], &[2, 2], &[1, 1], &[0, 0], &[1, 1]]).contains("2 values"));
        assert!(err(&[4, 1], [&[1, 1], &[2, 2], &[1, 1], &[0, 0], &[1, 1]]).contains("no room"));
        assert!(err(&[4, 1], [&[-2, 2], &[2, 2], &[1, 1], &[0, 0], &[1, 1]]).contains("output_size"));
        let mut h = OpHarness::new();
        let xi = h.i64(&[4, 1], &[0; 4]);
        let [size, k, d, p, s] = ok.map(|v| h.int_list(v));
        let out = h.out(ScalarType::Long, &[1, 2, 2]);
        let e = h.call(col2im_out, &[xi, size, k, d, p, s, out, out]).unwrap_err();
        assert!(e.message.contains("floating"), "{e}");
    }
}
