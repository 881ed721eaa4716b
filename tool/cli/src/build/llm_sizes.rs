//! A language model's sizes (cache length, audio length) as a recipe build plans them: the
//! recipe's requests, exact (`max-seq-len 512`, `max-seq-len=512`) or defaults
//! (`max-seq-len up-to=1024`), fitted to the checkpoint's config before any step runs. So the
//! export step's key and label and the manifest name the sizes the program gets, a default the
//! model cannot hold is lowered with a note naming both values, and a value the user chose
//! that it cannot hold fails the build before anything is built.

use rbuild_models::family::{ExportOptions, Family, Fitted, SizeRequest, Source};
use rbuild_recipe::LlmSpec;

use crate::error::{CliError, CliResult};

/// The recipe's request as the export takes it.
fn request<T: Copy, U>(asked: rbuild_recipe::SizeRequest<T>, convert: impl FnOnce(T) -> U) -> SizeRequest<U> {
    match asked {
        rbuild_recipe::SizeRequest::Exactly(v) => SizeRequest::Exactly(convert(v)),
        rbuild_recipe::SizeRequest::UpTo(v) => SizeRequest::UpTo(convert(v)),
    }
}

/// `base` with `llm`'s sizes fitted to `source` by `family`: the options to export with (the
/// fitted sizes, exact) and the fit. Each lowered default is printed as a note naming `recipe`.
pub fn fit(recipe: &str, family: &dyn Family, source: &Source, llm: &LlmSpec, base: ExportOptions) -> CliResult<(ExportOptions, Fitted)> {
    let asked = ExportOptions {
        max_seq_len: Some(request(llm.max_seq_len, |n| n)),
        max_audio_seconds: llm.max_audio_seconds.map(|s| request(s, f64::from)),
        ..base
    };
    let fitted = family.fit(source, &asked).map_err(|e| CliError(format!("{recipe}: {}: {e}", source.describe())))?;
    for lowered in &fitted.lowered {
        eprintln!("note: {recipe}: {}", lowered.describe("recipe default"));
    }
    Ok((asked.with_sizes(&fitted), fitted))
}

/// The fitted sizes for a step key and label: `max_seq_len 256, max_audio_seconds 19.2`.
pub fn describe(fitted: &Fitted) -> String {
    match fitted.max_audio_seconds {
        Some(s) => format!("max_seq_len {}, max_audio_seconds {s}", fitted.max_seq_len),
        None => format!("max_seq_len {}", fitted.max_seq_len),
    }
}
