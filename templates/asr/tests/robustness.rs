//! The parsers of outside input (WAV files, tiktoken vocabularies) on damaged and random
//! bytes: every case returns an error or a value, never a panic or an abort. Deterministic
//! mutations (a seeded generator), so CI runs the same cases every time.

use rbuild_asr_runner::audio;
use rbuild_asr_runner::tokenizer::parse_tiktoken;

mod common;
use common::testdata;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn no_panic<T>(what: &str, f: impl FnOnce() -> T + std::panic::UnwindSafe) -> T {
    std::panic::catch_unwind(f).unwrap_or_else(|_| panic!("{what}: panicked"))
}

/// Decodes, and resamples what decodes, as the runner would.
fn read(bytes: &[u8], what: &str) {
    let bytes = bytes.to_vec();
    no_panic(what, move || {
        if let Ok(a) = audio::read_wav_bytes(&bytes, "case.wav") {
            assert!(!a.samples.is_empty(), "{what}: decoded to no samples");
            // Tiny or absurd rates are the resampler's to refuse.
            if a.sample_rate >= 1000 && a.sample_rate <= 384_000 && a.samples.len() < 1 << 20 {
                let _ = audio::resample(&a.samples, a.sample_rate, 16_000);
            }
        }
    });
}

#[test]
fn damaged_wav_files_fail_cleanly() {
    let fox = std::fs::read(testdata("models/audio/fox_16k.wav")).unwrap();
    let mut rng = Rng(7);
    // Every header byte set to extremes, and random values.
    for i in 0..64.min(fox.len()) {
        for v in [0x00u8, 0xff, 0x7f, 0x80, rng.next() as u8] {
            let mut b = fox.clone();
            b[i] = v;
            read(&b, &format!("byte {i} = {v:#x}"));
        }
    }
    // The sizes in the header as 32-bit extremes (RIFF size at 4, fmt fields, data size).
    for at in [4usize, 16, 22, 24, 28, 32, 34, 40] {
        for v in [0u32, 1, u32::MAX, u32::MAX / 2, 0x8000_0000] {
            let mut b = fox.clone();
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            read(&b, &format!("u32 at {at} = {v:#x}"));
        }
    }
    // Truncations, and random flips anywhere.
    for len in (0..fox.len()).step_by(997).chain([1, 11, 12, 43, 44, 45]) {
        read(&fox[..len.min(fox.len())], &format!("truncated to {len}"));
    }
    for k in 0..200 {
        let mut b = fox.clone();
        for _ in 0..1 + rng.below(8) {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        read(&b, &format!("flips #{k}"));
    }
    // Random bytes behind a valid-looking RIFF/WAVE start.
    for k in 0..200 {
        let n = rng.below(512);
        let mut b = b"RIFF\x00\x00\x00\x00WAVEfmt ".to_vec();
        b.extend((0..n).map(|_| rng.next() as u8));
        read(&b, &format!("random #{k}"));
    }
}

#[test]
fn damaged_tiktoken_files_fail_cleanly() {
    let good = "IQ== 0\nIg== 1\nIw== 2\nJA== 3\n";
    assert!(parse_tiktoken(good).is_ok());
    let mut rng = Rng(11);
    let alphabet = b"AZaz09+/= \n\r-!\xc3\xa9";
    for k in 0..500 {
        let mut b = good.as_bytes().to_vec();
        for _ in 0..1 + rng.below(6) {
            let i = rng.below(b.len());
            b[i] = alphabet[rng.below(alphabet.len())];
        }
        let text = String::from_utf8_lossy(&b).into_owned();
        no_panic(&format!("tiktoken #{k}: {text:?}"), move || {
            let _ = parse_tiktoken(&text);
        });
    }
    for text in ["", "\n\n", "IQ==", "IQ== x", "IQ== 99999999999999999999", "==== 0", "IQ== 0\nIQ== 0", "IQ== -1"] {
        let t = text.to_string();
        no_panic(text, move || {
            let _ = parse_tiktoken(&t);
        });
    }
}

#[test]
fn the_padding_only_token_of_openais_vocabulary_parses() {
    // multilingual.tiktoken's last line: rank 50256 is the empty byte string.
    let t = parse_tiktoken("IQ== 0\n= 1\n").unwrap();
    assert!(parse_tiktoken(" 0\n").is_err(), "an empty token field is still malformed");
    drop(t);
}
