//! Command-line overrides (`rbuild mobilenet-cpu quantize=int8 platform=host`): `key=value`
//! words applied on top of a loaded recipe. The words are treated as a one-line source named
//! "command line", so a bad word is underlined just like a bad node in a file.

use std::path::Path;

use miette::{Report, SourceSpan};

use crate::choice::Choice;
use crate::diag::{LoadError, Problem, Source};
use crate::llm::{check_group_size, EmbeddingQuantize, LlmSpec, LLM_ONLY};
use crate::paths::{resolve_file, resolve_folder, PathUse};
use crate::recipe::{
    calibration_needs_int8, keep_float_needs_int8, language_only, no_input_shape, not_for_prebuilt, resolve_calibration, resolve_program, Catalog, Dtype,
    Fallback, ModelKind, Quantize, Recipe, PTE_MODEL,
};
use crate::weights::{resolve_weights, WeightsSource};
use crate::size_request::SizeRequest;
use crate::suggest;

/// Every key [`Recipe::apply_overrides`] accepts.
pub const OVERRIDE_KEYS: &[&str] = &[
    "weights",
    "program",
    "seed",
    "platform",
    "input-shape",
    "dtype",
    "quantize",
    "calibration",
    "keep-float",
    "fallback",
    "accelerator",
    "embed-program",
    "top",
    "max-seq-len",
    "group-size",
    "embedding-quantize",
    "tokenizer",
    "full-logits",
    "max-audio-seconds",
    "atol",
    "rtol",
];

impl Recipe {
    /// Applies `key=value` words in order (a later word for the same key wins). Either every
    /// word applies or none does: all problems come back in one report.
    ///
    /// `weights=PATH`, `program=PATH` and `tokenizer=PATH` are resolved against the current
    /// folder (they were typed there), `seed=N` selects seeded random weights, and
    /// `platform=a,b` replaces the recipe's platform list with known platforms. Keys are checked against the recipe's
    /// model kind: `input-shape` is for image models, the language-model keys (`max-seq-len`,
    /// …) for language models, `program` for prebuilt programs (`model "pte"`), which take no
    /// other model key.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, words: &[S], catalog: &Catalog) -> Result<(), Report> {
        let mut text = String::new();
        let mut starts = Vec::new();
        for word in words {
            if !text.is_empty() {
                text.push(' ');
            }
            starts.push(text.len());
            text.push_str(word.as_ref());
        }
        let source = Source::new("command line", text);
        let mut next = self.clone();
        let mut problems = Vec::new();
        for (word, &start) in words.iter().zip(&starts) {
            let word = word.as_ref();
            let Some((key, value)) = word.split_once('=') else {
                let problem = source
                    .problem(span(start, word.len()), format!("`{word}` is not a `key=value` override"), "no `=`")
                    .help(format!("overrides are `key=value`; keys: {}", OVERRIDE_KEYS.join(", ")));
                problems.push(problem);
                continue;
            };
            let at = Word { source: &source, key, key_span: span(start, key.len()), value_start: start + key.len() + 1 };
            if let Err(problem) = apply(&mut next, &at, value, catalog) {
                problems.push(problem);
            }
        }
        LoadError::check("invalid overrides", problems)?;
        *self = next;
        Ok(())
    }
}

/// Where one override word sits in the command-line source.
struct Word<'a> {
    source: &'a Source,
    key: &'a str,
    key_span: SourceSpan,
    value_start: usize,
}

impl Word<'_> {
    /// A problem about `part` of the value (which starts `offset` bytes into it), labelled
    /// `label`, with a help line saying what the key takes.
    fn bad(&self, offset: usize, part: &str, label: &str, expected: &str) -> Problem {
        let key = self.key;
        self.source
            .problem(span(self.value_start + offset, part.len()), format!("bad value `{part}` for `{key}`"), label)
            .help(format!("`{key}` takes {expected}"))
    }
}

fn apply(recipe: &mut Recipe, w: &Word, value: &str, catalog: &Catalog) -> Result<(), Problem> {
    let kind = recipe.model.kind();
    let arch = recipe.model.arch.clone();
    // A prebuilt program fixed its weights, shapes and quantization when it was exported.
    let fixed_in_program = ["weights", "seed", "input-shape", "dtype", "calibration", "keep-float"];
    if kind == ModelKind::Prebuilt && (fixed_in_program.contains(&w.key) || LLM_ONLY.contains(&w.key)) {
        return Err(not_for_prebuilt(w.key).at(w.source, w.key_span));
    }
    if LLM_ONLY.contains(&w.key) && recipe.model.llm.is_none() {
        return Err(language_only(w.key, &arch, catalog).at(w.source, w.key_span));
    }
    let value_span = span(w.value_start, value.len());
    match w.key {
        "weights" => {
            recipe.model.weights = resolve_weights(value, Path::new(""), kind)
                .map_err(|e| e.problem(w.source, value_span, "the current folder", kind.path_use()))?;
        }
        "program" => {
            if kind != ModelKind::Prebuilt {
                return Err(w
                    .source
                    .problem(w.key_span, format!("`program` applies to `model \"{PTE_MODEL}\"` only"), "not for this model")
                    .help(format!("`{arch}` is exported by rbuild; `program=PATH` replaces a prebuilt program's `.pte` file")));
            }
            let path = resolve_program(value, Path::new("")).map_err(|e| e.problem(w.source, value_span, "the current folder", PathUse::Program))?;
            recipe.model.weights = WeightsSource::File(path);
        }
        "seed" => {
            let seed = value.parse().map_err(|_| w.bad(0, value, "not a seed", "a non-negative integer, e.g. `seed=3`"))?;
            recipe.model.weights = WeightsSource::Random(seed);
        }
        "platform" => {
            let mut platforms: Vec<String> = Vec::new();
            for (offset, name) in split_commas(value) {
                if !catalog.platforms.contains(&name) {
                    let help = suggest::help(name, catalog.platforms, "known platforms");
                    return Err(w.bad(offset, name, "not a known platform", "known platform names").help(help));
                }
                if !platforms.iter().any(|p| p == name) {
                    platforms.push(name.to_string());
                }
            }
            recipe.platforms = platforms;
        }
        "input-shape" => {
            if kind == ModelKind::Language {
                return Err(no_input_shape(&arch).at(w.source, w.key_span));
            }
            let expected = "positive integers separated by commas, e.g. `1,3,224,224`";
            let mut shape = Vec::new();
            for (offset, dim) in split_commas(value) {
                match dim.parse::<u32>() {
                    Ok(n) if n > 0 => shape.push(n as usize),
                    _ => return Err(w.bad(offset, dim, "not a positive integer", expected)),
                }
            }
            recipe.model.input_shape = shape;
        }
        "dtype" => recipe.model.dtype = choice::<Dtype>(w, value)?,
        "quantize" => {
            let q = choice::<Quantize>(w, value)?;
            kind.check_quantize(q).map_err(|r| r.at(w.source, value_span))?;
            recipe.model.quantize = q;
        }
        "calibration" => {
            if kind == ModelKind::Language {
                return Err(calibration_needs_int8(&arch).at(w.source, w.key_span));
            }
            // As in the recipe: imported models may calibrate on a safetensors file of inputs.
            let resolved = if kind == ModelKind::Imported { resolve_calibration(value, Path::new("")) } else { resolve_folder(value, Path::new("")) };
            let path = resolved.map_err(|e| e.problem(w.source, value_span, "the current folder", PathUse::Calibration))?;
            recipe.model.calibration = Some(path);
        }
        "keep-float" => {
            if kind == ModelKind::Language || recipe.model.quantize != Quantize::Int8 {
                return Err(keep_float_needs_int8(&arch).at(w.source, w.key_span));
            }
            recipe.model.keep_float = split_commas(value).map(|(_, name)| name.to_string()).filter(|n| !n.is_empty()).collect();
        }
        "fallback" => recipe.backend.fallback = choice::<Fallback>(w, value)?,
        "accelerator" => match &mut recipe.backend.npu {
            Some(npu) => npu.accelerator = choice::<crate::recipe::Accelerator>(w, value)?,
            None => return Err(w.bad(0, value, "not for this backend", "an ethos-u backend recipe")),
        },
        "embed-program" => recipe.runner.embed_program = boolean(w, value)?,
        "top" => match value.parse::<u32>() {
            Ok(n) if n > 0 => recipe.runner.top = Some(n),
            _ => return Err(w.bad(0, value, "not a positive integer", "a positive integer")),
        },
        "atol" | "rtol" => {
            let tolerance = value
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| w.bad(0, value, "not a tolerance", "a non-negative number, e.g. `atol=1e-4` (0: exact)"))?;
            if w.key == "atol" {
                recipe.verify.atol = Some(tolerance);
            } else {
                recipe.verify.rtol = Some(tolerance);
            }
        }
        "max-seq-len" | "group-size" | "embedding-quantize" | "tokenizer" | "full-logits" | "max-audio-seconds" => {
            // Checked above: the recipe is a language model.
            let Some(llm) = recipe.model.llm.as_mut() else { return Ok(()) };
            apply_llm(llm, w, value)?;
        }
        key => {
            let help = suggest::help(key, OVERRIDE_KEYS, "override keys");
            return Err(w.source.problem(w.key_span, format!("unknown override key `{key}`"), "unknown key").help(help));
        }
    }
    Ok(())
}

/// The language-model keys, with the same checks as the recipe's fields. A size typed on the
/// command line is the user's own: exact, never lowered to fit the model.
fn apply_llm(llm: &mut LlmSpec, w: &Word, value: &str) -> Result<(), Problem> {
    match w.key {
        "max-seq-len" => match value.parse::<usize>() {
            Ok(n) if (1..=LlmSpec::MAX_SEQ_LEN).contains(&n) => llm.max_seq_len = SizeRequest::Exactly(n),
            _ => return Err(w.bad(0, value, "not from 1 to 1000000", "an integer from 1 to 1000000, e.g. `max-seq-len=128`")),
        },
        "group-size" => {
            let n = value.parse::<i128>().map_err(|_| w.bad(0, value, "not an integer", "32, 64, 128 or 256"))?;
            llm.group_size = check_group_size(n).map_err(|r| r.at(w.source, span(w.value_start, value.len())))?;
        }
        "embedding-quantize" => llm.embedding_quantize = choice::<EmbeddingQuantize>(w, value)?,
        "tokenizer" => {
            let path = resolve_file(value, Path::new("")).map_err(|e| {
                e.problem(w.source, span(w.value_start, value.len()), "the current folder", PathUse::Tokenizer)
            })?;
            llm.tokenizer = Some(path);
        }
        "full-logits" => llm.full_logits = boolean(w, value)?,
        "max-audio-seconds" => match value.parse::<u32>() {
            Ok(n) if (1..=LlmSpec::MAX_AUDIO_SECONDS).contains(&n) => llm.max_audio_seconds = Some(SizeRequest::Exactly(n)),
            _ => return Err(w.bad(0, value, "not from 1 to 86400", "seconds from 1 to 86400, e.g. `max-audio-seconds=600`")),
        },
        _ => unreachable!("apply() routes only language-model keys here"),
    }
    Ok(())
}

fn boolean(w: &Word, value: &str) -> Result<bool, Problem> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(w.bad(0, value, "not `true` or `false`", "`true` or `false`")),
    }
}

fn choice<T: Choice>(w: &Word, value: &str) -> Result<T, Problem> {
    T::from_name(value).ok_or_else(|| {
        let expected = T::expected();
        let problem = w.bad(0, value, &format!("not {}", T::a_what()), &expected);
        match suggest::closest(value, T::names()) {
            Some(best) => problem.help(format!("did you mean `{best}`? `{}` takes {expected}", w.key)),
            None => problem,
        }
    })
}

/// The comma-separated parts of `value` with their byte offsets in it. An empty value yields
/// one empty part, so "nothing given" is reported like any other bad part.
fn split_commas(value: &str) -> impl Iterator<Item = (usize, &str)> {
    value.split(',').scan(0, |offset, part| {
        let at = *offset;
        *offset += part.len() + 1;
        Some((at, part))
    })
}

fn span(offset: usize, len: usize) -> SourceSpan {
    SourceSpan::from(offset..offset + len)
}
