//! Text normalization before word error rates: openai-whisper's English normalizer, so WER
//! figures compare with the ones Whisper's papers and model cards report.

mod decimal;
mod english;
mod numbers;
mod spelling;
mod symbols;

pub use english::normalize_english;
pub use numbers::standardize_numbers;
pub use spelling::standardize_spellings;
pub use symbols::remove_symbols_and_diacritics;

#[cfg(test)]
mod cases;
