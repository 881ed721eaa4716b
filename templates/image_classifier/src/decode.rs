//! PNG and JPEG decoding to 8-bit RGB, as `PIL.Image.open(f).convert("RGB")` would give.
//!
//! The format comes from the file's magic bytes, not its name. Alpha is dropped (PIL's RGBA →
//! RGB conversion ignores it), grayscale is replicated, palettes are expanded and 16-bit
//! samples keep their high byte.

use std::fmt;
use std::io::Cursor;

use crate::preprocess::RgbImage;

/// Images above this many pixels are refused (PIL refuses above about 179 M as a
/// decompression bomb; 2^27 keeps the RGB buffer under 400 MiB).
pub const MAX_PIXELS: u64 = 1 << 27;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

fn err(msg: impl Into<String>) -> DecodeError {
    DecodeError(msg.into())
}

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
const JPEG_MAGIC: &[u8] = &[0xFF, 0xD8, 0xFF];

/// Decodes a PNG or JPEG file's bytes.
pub fn decode_image(bytes: &[u8]) -> Result<RgbImage, DecodeError> {
    if bytes.starts_with(PNG_MAGIC) {
        decode_png(bytes)
    } else if bytes.starts_with(JPEG_MAGIC) {
        decode_jpeg(bytes)
    } else if bytes.is_empty() {
        Err(err("empty file, not a PNG or JPEG image"))
    } else {
        Err(err("not a PNG or JPEG image (unrecognised signature)"))
    }
}

fn check_size(width: u64, height: u64) -> Result<(), DecodeError> {
    if width == 0 || height == 0 {
        return Err(err(format!("image has no pixels ({width}x{height})")));
    }
    if width * height > MAX_PIXELS {
        return Err(err(format!("image is {width}x{height}, above the {MAX_PIXELS}-pixel limit")));
    }
    Ok(())
}

pub fn decode_png(bytes: &[u8]) -> Result<RgbImage, DecodeError> {
    let bad = |e: png::DecodingError| err(format!("invalid PNG: {e}"));
    // Room for the largest accepted image at 16-bit RGBA plus the decoder's row buffers.
    let limits = png::Limits { bytes: (MAX_PIXELS * 8) as usize + (1 << 24) };
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    // EXPAND: palette → RGB(A), low-bit gray → 8 bit, tRNS → alpha; STRIP_16: keep high byte.
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(bad)?;
    let (w, h) = reader.info().size();
    check_size(w as u64, h as u64)?;
    let size = reader.output_buffer_size().ok_or_else(|| err(format!("PNG of {w}x{h} is too large")))?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(bad)?;
    if info.bit_depth != png::BitDepth::Eight {
        return Err(err(format!("unsupported PNG bit depth after expansion: {:?}", info.bit_depth)));
    }
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(err("PNG palette was not expanded")),
    };
    let (w, h) = (info.width as usize, info.height as usize);
    let rows = buf.chunks(info.line_size).take(h);
    let mut data = Vec::with_capacity(w * h * 3);
    for row in rows {
        for px in row[..w * channels].chunks_exact(channels) {
            match channels {
                1 | 2 => data.extend_from_slice(&[px[0]; 3]),
                _ => data.extend_from_slice(&px[..3]),
            }
        }
    }
    Ok(RgbImage { width: w, height: h, data })
}

pub fn decode_jpeg(bytes: &[u8]) -> Result<RgbImage, DecodeError> {
    let mut decoder = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    decoder.set_max_decoding_buffer_size((MAX_PIXELS * 4) as usize);
    // jpeg-decoder has a few `assert!`s reachable from malformed files; a bad image must be
    // an error, not a crash, so contain any panic here (silently: the caller reports it).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let decoded =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.decode().map(|px| (px, decoder.info()))));
    std::panic::set_hook(hook);
    let (pixels, info) = match decoded {
        Ok(Ok((px, Some(info)))) => (px, info),
        Ok(Ok((_, None))) => return Err(err("invalid JPEG: no frame")),
        Ok(Err(e)) => return Err(err(format!("invalid JPEG: {e}"))),
        Err(_) => return Err(err("invalid JPEG: the decoder failed on malformed data")),
    };
    let (w, h) = (info.width as usize, info.height as usize);
    check_size(w as u64, h as u64)?;
    let n = w * h;
    let mut data = Vec::with_capacity(n * 3);
    use jpeg_decoder::PixelFormat::*;
    match info.pixel_format {
        L8 => pixels.iter().take(n).for_each(|&v| data.extend_from_slice(&[v; 3])),
        // Big-endian 16-bit samples: keep the high byte.
        L16 => pixels.chunks_exact(2).take(n).for_each(|v| data.extend_from_slice(&[v[0]; 3])),
        RGB24 => data.extend_from_slice(&pixels[..(n * 3).min(pixels.len())]),
        // jpeg-decoder yields plain (non-inverted) CMYK; convert as PIL's cmyk2rgb does.
        CMYK32 => pixels.chunks_exact(4).take(n).for_each(|p| {
            let nk = 255 - p[3] as u32;
            for &c in &p[..3] {
                let t = c as u32 * nk + 128;
                data.push((nk - (((t >> 8) + t) >> 8)) as u8);
            }
        }),
    }
    if data.len() != n * 3 {
        return Err(err(format!("invalid JPEG: {} pixel bytes for a {w}x{h} image", pixels.len())));
    }
    Ok(RgbImage { width: w, height: h, data })
}
