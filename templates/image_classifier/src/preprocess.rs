//! torchvision's ImageNet eval pipeline on a PIL image, reproduced bit for bit:
//! `Resize(s, BILINEAR, antialias=True) → CenterCrop(h, w) → ToTensor() → Normalize(mean, std)`.
//!
//! The resize is Pillow's `ImagingResample` (Resample.c) for 8-bit images: a triangle filter
//! whose support widens with the downscale factor, coefficients normalised in double and
//! converted to 22-bit fixed point, a horizontal pass then a vertical pass, each rounding and
//! clamping to u8.

/// An 8-bit RGB image, rows top to bottom, pixels interleaved (HWC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    pub width: usize,
    pub height: usize,
    /// `height * width * 3` bytes.
    pub data: Vec<u8>,
}

impl RgbImage {
    fn pixel(&self, y: usize, x: usize) -> &[u8] {
        let i = (y * self.width + x) * 3;
        &self.data[i..i + 3]
    }
}

pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// `Resize(short)`'s output (width, height): the shorter side becomes `short`, the longer
/// `int(short * long / short_side)` (torchvision truncates).
pub fn resized_size(width: usize, height: usize, short: usize) -> (usize, usize) {
    let (s, l) = if width <= height { (width, height) } else { (height, width) };
    // Python's `int(a * b / c)`: one correctly rounded double division, then truncation.
    let long = ((short * l) as f64 / s as f64) as usize;
    if width <= height {
        (short, long)
    } else {
        (long, short)
    }
}

/// The resize target for a crop of `crop_h`×`crop_w`: ImageNet's 256/224 ratio applied to the
/// crop's shorter side (256 for 224), rounded.
pub fn resize_for_crop(crop_h: usize, crop_w: usize) -> usize {
    let c = crop_h.min(crop_w);
    (c * 256 + 112) / 224
}

/// The whole pipeline: resize shorter side to [`resize_for_crop`], center-crop to
/// `crop_h`×`crop_w`, normalise. Returns float32 CHW (`[3, crop_h, crop_w]`).
pub fn imagenet_eval(img: &RgbImage, crop_h: usize, crop_w: usize) -> Vec<f32> {
    let (w, h) = resized_size(img.width, img.height, resize_for_crop(crop_h, crop_w));
    let resized = resize_bilinear_aa(img, w, h);
    to_normalized_chw(&center_crop(&resized, crop_h, crop_w), IMAGENET_MEAN, IMAGENET_STD)
}

/// Pillow's fixed-point precision for 8-bit resampling (`32 - 8 - 2`).
const PRECISION_BITS: u32 = 22;

/// Per output pixel along one axis: the first input index and the fixed-point weights.
struct Coeffs {
    first: Vec<usize>,
    weights: Vec<Vec<i32>>,
}

/// Pillow's `precompute_coeffs` (box = whole image) followed by `normalize_coeffs_8bpc`.
fn coeffs(in_size: usize, out_size: usize) -> Coeffs {
    let scale = in_size as f64 / out_size as f64;
    // Antialiasing: when shrinking, the triangle widens to cover `scale` input pixels.
    let filterscale = scale.max(1.0);
    let support = filterscale; // bilinear support 1.0 × filterscale
    let inv = 1.0 / filterscale;
    let mut first = Vec::with_capacity(out_size);
    let mut weights = Vec::with_capacity(out_size);
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        // C's `(int)(v + 0.5)` truncates toward zero, then clamps.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let w: Vec<f64> = (xmin..xmax)
            .map(|x| {
                let d = ((x as f64 - center + 0.5) * inv).abs();
                if d < 1.0 {
                    1.0 - d
                } else {
                    0.0
                }
            })
            .collect();
        let total: f64 = w.iter().sum();
        let fixed = w
            .iter()
            .map(|&v| {
                let v = if total != 0.0 { v / total } else { v };
                // Round half away from zero, as Pillow's `(int)(±0.5 + v * 2^22)`.
                let s = v * (1u32 << PRECISION_BITS) as f64;
                (if s < 0.0 { s - 0.5 } else { s + 0.5 }) as i32
            })
            .collect();
        first.push(xmin);
        weights.push(fixed);
    }
    Coeffs { first, weights }
}

/// Pillow's `clip8`: drop the fraction (the accumulator started at one half, so this rounds).
fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Weighted sum of `n` channel triples: `src(k)` is the k-th tap's pixel.
fn convolve<'a>(weights: &[i32], src: impl Fn(usize) -> &'a [u8], out: &mut [u8]) {
    let mut acc = [1i32 << (PRECISION_BITS - 1); 3];
    for (k, &wk) in weights.iter().enumerate() {
        let p = src(k);
        for c in 0..3 {
            acc[c] += p[c] as i32 * wk;
        }
    }
    for c in 0..3 {
        out[c] = clip8(acc[c]);
    }
}

/// PIL's `Image.resize((width, height), BILINEAR)` on an RGB image (antialiased when shrinking).
pub fn resize_bilinear_aa(img: &RgbImage, width: usize, height: usize) -> RgbImage {
    if img.width == 0 || img.height == 0 || width == 0 || height == 0 {
        return RgbImage { width, height, data: vec![0; width * height * 3] };
    }
    let mut cur = img.clone();
    let vert = coeffs(img.height, height);
    if width != img.width {
        // Pillow's horizontal pass only covers the rows the vertical pass will read; for a
        // full-image box that is every row, so rows need no offsetting here.
        let horiz = coeffs(img.width, width);
        let mut out = vec![0u8; width * img.height * 3];
        for y in 0..img.height {
            for x in 0..width {
                let x0 = horiz.first[x];
                let o = (y * width + x) * 3;
                convolve(&horiz.weights[x], |k| cur.pixel(y, x0 + k), &mut out[o..o + 3]);
            }
        }
        cur = RgbImage { width, height: img.height, data: out };
    }
    if height != img.height {
        let mut out = vec![0u8; width * height * 3];
        for y in 0..height {
            let y0 = vert.first[y];
            for x in 0..width {
                let o = (y * width + x) * 3;
                convolve(&vert.weights[y], |k| cur.pixel(y0 + k, x), &mut out[o..o + 3]);
            }
        }
        cur = RgbImage { width, height, data: out };
    }
    cur
}

/// torchvision `CenterCrop((crop_h, crop_w))`: offsets `round((H − h) / 2)` (Python rounds
/// halves to even); a side shorter than the crop is zero-padded, `(crop − size) // 2` before.
pub fn center_crop(img: &RgbImage, crop_h: usize, crop_w: usize) -> RgbImage {
    let offset = |size: usize, crop: usize| -> isize {
        if crop > size {
            -(((crop - size) / 2) as isize)
        } else {
            ((size - crop) as f64 / 2.0).round_ties_even() as isize
        }
    };
    let (top, left) = (offset(img.height, crop_h), offset(img.width, crop_w));
    let mut data = vec![0u8; crop_h * crop_w * 3];
    for y in 0..crop_h {
        let sy = y as isize + top;
        if sy < 0 || sy >= img.height as isize {
            continue;
        }
        for x in 0..crop_w {
            let sx = x as isize + left;
            if sx < 0 || sx >= img.width as isize {
                continue;
            }
            let o = (y * crop_w + x) * 3;
            data[o..o + 3].copy_from_slice(img.pixel(sy as usize, sx as usize));
        }
    }
    RgbImage { width: crop_w, height: crop_h, data }
}

/// `ToTensor()` then `Normalize(mean, std)`: CHW float32, `(v / 255 − mean) / std`, each step
/// in f32 as torch does, so the result is bit-identical.
pub fn to_normalized_chw(img: &RgbImage, mean: [f32; 3], std: [f32; 3]) -> Vec<f32> {
    let plane = img.width * img.height;
    let mut out = vec![0f32; 3 * plane];
    for (i, px) in img.data.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * plane + i] = (px[c] as f32 / 255.0 - mean[c]) / std[c];
        }
    }
    out
}
