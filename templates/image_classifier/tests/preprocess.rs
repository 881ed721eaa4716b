//! Preprocessing against torchvision + PIL references (`models/images/*.preprocessed.safetensors`).

use rbuild_image_classifier::decode::decode_png;
use rbuild_image_classifier::preprocess::{
    center_crop, imagenet_eval, resize_bilinear_aa, resize_for_crop, resized_size, to_normalized_chw, RgbImage,
    IMAGENET_MEAN, IMAGENET_STD,
};
mod common;
use common::testdata;

use safetensors::{Dtype, SafeTensors};

const CASES: [&str; 3] = ["img1_gradients_w320_h256", "img2_shapes_w300_h300", "img3_wide_w480_h360"];

struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn load(case: &str) -> Reference {
        let path = testdata(&format!("models/images/{case}.preprocessed.safetensors"));
        Reference { bytes: std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")) }
    }

    fn tensor(&self, name: &str) -> (Vec<usize>, Dtype, Vec<u8>) {
        let st = SafeTensors::deserialize(&self.bytes).expect("reference safetensors");
        let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        (t.shape().to_vec(), t.dtype(), t.data().to_vec())
    }

    fn image(&self, name: &str) -> RgbImage {
        let (shape, dtype, data) = self.tensor(name);
        assert_eq!(dtype, Dtype::U8, "{name}");
        assert_eq!(shape.len(), 3, "{name}");
        assert_eq!(shape[2], 3, "{name}");
        RgbImage { width: shape[1], height: shape[0], data }
    }

    fn floats(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        let (shape, dtype, data) = self.tensor(name);
        assert_eq!(dtype, Dtype::F32, "{name}");
        (shape, data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
    }
}

fn decoded(case: &str) -> RgbImage {
    let path = testdata(&format!("models/images/{case}.png"));
    decode_png(&std::fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Largest per-byte difference; panics if the sizes differ.
fn max_u8_diff(what: &str, got: &RgbImage, want: &RgbImage) -> u8 {
    assert_eq!((got.width, got.height), (want.width, want.height), "{what}: size");
    got.data.iter().zip(&want.data).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0)
}

#[test]
fn decoded_png_equals_reference() {
    for case in CASES {
        let want = Reference::load(case).image("image_u8_hwc");
        assert_eq!(decoded(case), want, "{case}");
    }
}

#[test]
fn resize_size_follows_torchvision() {
    assert_eq!(resized_size(320, 256, 256), (320, 256));
    assert_eq!(resized_size(300, 300, 256), (256, 256));
    // 256 * 480 / 360 = 341.33 → truncated.
    assert_eq!(resized_size(480, 360, 256), (341, 256));
    assert_eq!(resized_size(360, 480, 256), (256, 341));
    // 256 * 511 / 300 = 436.05…; 256 * 299 / 256 = 299 exactly.
    assert_eq!(resized_size(511, 300, 256), (436, 256));
    assert_eq!(resized_size(256, 299, 256), (256, 299));
    assert_eq!(resize_for_crop(224, 224), 256);
    assert_eq!(resize_for_crop(299, 299), 342); // 299·256/224 = 341.7
    assert_eq!(resize_for_crop(160, 192), 183); // shorter side 160 → 182.9
}

#[test]
fn resize_matches_pil_bit_exactly() {
    for case in CASES {
        let r = Reference::load(case);
        let want = r.image("pil.resized_u8_hwc");
        let img = decoded(case);
        let (w, h) = resized_size(img.width, img.height, 256);
        let got = resize_bilinear_aa(&img, w, h);
        assert_eq!(max_u8_diff(case, &got, &want), 0, "{case}: resized image differs from PIL");
    }
}

#[test]
fn center_crop_matches_torchvision() {
    for case in CASES {
        let r = Reference::load(case);
        let got = center_crop(&r.image("pil.resized_u8_hwc"), 224, 224);
        assert_eq!(got, r.image("pil.cropped_u8_hwc"), "{case}");
    }
}

#[test]
fn center_crop_rounds_half_to_even_and_pads() {
    let img = RgbImage { width: 5, height: 1, data: (0..15).collect() };
    // (5 − 2) / 2 = 1.5 → 2 (Python round); (5 − 4) / 2 = 0.5 → 0.
    assert_eq!(center_crop(&img, 1, 2).data, [6, 7, 8, 9, 10, 11]);
    assert_eq!(center_crop(&img, 1, 4).data[..3], [0, 1, 2]);
    // Crop larger than the image: (8 − 5) // 2 = 1 zero column before, 2 after.
    let padded = center_crop(&img, 1, 8);
    assert_eq!(padded.data[..3], [0, 0, 0]);
    assert_eq!(padded.data[3..18], img.data[..]);
    assert_eq!(padded.data[18..], [0; 6]);
}

#[test]
fn normalized_matches_pil_pipeline() {
    for case in CASES {
        let r = Reference::load(case);
        let (shape, want) = r.floats("pil.normalized");
        assert_eq!(shape, [1, 3, 224, 224]);
        let from_crop = to_normalized_chw(&r.image("pil.cropped_u8_hwc"), IMAGENET_MEAN, IMAGENET_STD);
        let end_to_end = imagenet_eval(&decoded(case), 224, 224);
        for (what, got) in [("from reference crop", &from_crop), ("from the PNG", &end_to_end)] {
            let diff = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            eprintln!("{case} {what}: max |diff| vs pil.normalized = {diff:e}");
            assert!(diff <= 1e-6, "{case} {what}: max |diff| {diff}");
        }
    }
}

#[test]
fn resize_identity_and_upscale_are_sane() {
    let img = decoded("img1_gradients_w320_h256");
    assert_eq!(resize_bilinear_aa(&img, img.width, img.height), img);
    // Upscaling a flat image keeps it flat (weights sum to one in fixed point).
    let flat = RgbImage { width: 3, height: 2, data: [10, 20, 30].repeat(6) };
    assert_eq!(resize_bilinear_aa(&flat, 7, 5).data, [10, 20, 30].repeat(35));
}
