//! Decoding of the PNG colour types and bit depths (PNGs made here with the png encoder) and
//! rejection of malformed input.

mod common;
use common::testdata;

use rbuild_image_classifier::decode::decode_image;
use rbuild_image_classifier::preprocess::RgbImage;

fn encode_png(
    w: u32,
    h: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
    palette: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(color);
    enc.set_depth(depth);
    if let Some(p) = palette {
        enc.set_palette(p.to_vec());
    }
    let mut writer = enc.write_header().unwrap();
    writer.write_image_data(data).unwrap();
    writer.finish().unwrap();
    out
}

fn rgb(w: usize, h: usize, data: &[u8]) -> RgbImage {
    RgbImage { width: w, height: h, data: data.to_vec() }
}

#[test]
fn png_colour_types_become_rgb() {
    use png::{BitDepth::*, ColorType::*};
    let gray = encode_png(2, 1, Grayscale, Eight, &[7, 200], None);
    assert_eq!(decode_image(&gray).unwrap(), rgb(2, 1, &[7, 7, 7, 200, 200, 200]));
    let gray_alpha = encode_png(1, 1, GrayscaleAlpha, Eight, &[9, 0], None);
    assert_eq!(decode_image(&gray_alpha).unwrap(), rgb(1, 1, &[9, 9, 9]));
    let rgba = encode_png(2, 1, Rgba, Eight, &[1, 2, 3, 0, 4, 5, 6, 255], None);
    assert_eq!(decode_image(&rgba).unwrap(), rgb(2, 1, &[1, 2, 3, 4, 5, 6]));
    // 16-bit samples keep their high byte.
    let rgb16 = encode_png(1, 1, Rgb, Sixteen, &[0x12, 0x34, 0xAB, 0xCD, 0xFF, 0x00], None);
    assert_eq!(decode_image(&rgb16).unwrap(), rgb(1, 1, &[0x12, 0xAB, 0xFF]));
    // 4-bit palette indices 1, 0.
    let pal = encode_png(2, 1, Indexed, Four, &[0x10], Some(&[10, 20, 30, 40, 50, 60]));
    assert_eq!(decode_image(&pal).unwrap(), rgb(2, 1, &[40, 50, 60, 10, 20, 30]));
    // 1-bit grayscale expands to 0/255.
    let bits = encode_png(3, 1, Grayscale, One, &[0b1010_0000], None);
    assert_eq!(decode_image(&bits).unwrap(), rgb(3, 1, &[255, 255, 255, 0, 0, 0, 255, 255, 255]));
}

#[test]
fn malformed_input_is_an_error() {
    let png = std::fs::read(testdata("models/images/img2_shapes_w300_h300.png")).unwrap();
    // Cuts anywhere up to the image data's last chunk. (A damaged IEND after complete image
    // data still decodes, as in PIL.)
    for cut in [4, 8, 20, 33, 100, png.len() / 2, png.len() - 13] {
        assert!(decode_image(&png[..cut]).is_err(), "PNG cut at {cut} of {}", png.len());
    }
    let mut corrupt = png.clone();
    corrupt[png.len() / 2] ^= 0xFF;
    assert!(decode_image(&corrupt).is_err());
    assert!(decode_image(b"").is_err());
    assert!(decode_image(b"hello, not an image").is_err());
    for cut in [3, 4, 10, 64] {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        jpeg.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0\xFF\xDB\0\x43\0");
        jpeg.resize(64, 0x11);
        assert!(decode_image(&jpeg[..cut]).is_err(), "JPEG cut at {cut}");
    }
}

fn encode_jpeg(w: u16, h: u16, color: jpeg_encoder::ColorType, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 100).encode(data, w, h, color).unwrap();
    out
}

fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0)
}

#[test]
fn jpeg_round_trips_to_rgb() {
    let (w, h) = (40usize, 24usize);
    let smooth: Vec<u8> =
        (0..w * h).flat_map(|i| [(i % w * 6) as u8, (i / w * 10) as u8, (120 + i % w + i / w) as u8]).collect();
    let img = decode_image(&encode_jpeg(w as u16, h as u16, jpeg_encoder::ColorType::Rgb, &smooth)).unwrap();
    assert_eq!((img.width, img.height), (w, h));
    // Quality 100 on smooth content: only quantisation and colour-conversion noise is left.
    assert!(max_diff(&img.data, &smooth) <= 6, "max diff {}", max_diff(&img.data, &smooth));

    let gray: Vec<u8> = (0..w * h).map(|i| (i * 7 % 256) as u8 / 2 + 60).collect();
    let img = decode_image(&encode_jpeg(w as u16, h as u16, jpeg_encoder::ColorType::Luma, &gray)).unwrap();
    let replicated: Vec<u8> = gray.iter().flat_map(|&v| [v; 3]).collect();
    assert!(max_diff(&img.data, &replicated) <= 24);
    assert!(img.data.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
}

#[test]
fn cmyk_jpeg_converts_like_pil() {
    // Flat patches: (C, M, Y, K) → PIL's cmyk2rgb: channel = (255 − K)(255 − C)/255.
    for (cmyk, rgb) in
        [([0u8, 0, 0, 0], [255u8, 255, 255]), ([255, 0, 0, 0], [0, 255, 255]), ([0, 0, 0, 255], [0, 0, 0])]
    {
        let data = cmyk.repeat(16 * 16);
        let img = decode_image(&encode_jpeg(16, 16, jpeg_encoder::ColorType::Cmyk, &data)).unwrap();
        assert!(max_diff(&img.data, &rgb.repeat(16 * 16)) <= 2, "{cmyk:?} → {:?}", &img.data[..3]);
    }
}
