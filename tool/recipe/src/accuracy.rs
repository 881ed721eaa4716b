//! The `accuracy { … }` block of a recipe's `verify`: a task metric computed on a held-out set
//! from the built program and from a reference program exported from the same weights, and
//! how far the built one may fall behind before the build fails.
//!
//! ```kdl
//! verify {
//!     accuracy {
//!         data "eval/wiki.txt"     // text file, audio folder or image folder
//!         metric "perplexity"      // perplexity | wer | top1 | top5
//!         reference "fp32"         // the program exported from the same weights, unquantized
//!         max-regression "2%"      // relative: perplexity/wer may rise, top-k may fall by this
//!         ctx 256                  // perplexity only: tokens per chunk
//!     }
//! }
//! ```

use std::path::{Path, PathBuf};

use kdl::{KdlNode, KdlValue};
use miette::SourceSpan;

use crate::choice::Choice;
use crate::decode::{Decoder, Parent};
use crate::paths::resolve_path;
use crate::recipe::{ModelSpec, RunnerSpec};

/// What the accuracy gate measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccuracyMetric {
    /// llama.cpp's `llama-perplexity` over a text file (language models, runner `llm`).
    Perplexity,
    /// Word error rate over WAV files with `.txt` transcripts (speech models, runner `asr`).
    Wer,
    /// Share of images whose class is the best guess (classifiers, runner `image-classifier`).
    Top1,
    /// Share of images whose class is among the five best guesses.
    Top5,
}

impl Choice for AccuracyMetric {
    const WHAT: &'static str = "accuracy metric";
    const ALL: &'static [(&'static str, Self)] =
        &[("perplexity", AccuracyMetric::Perplexity), ("wer", AccuracyMetric::Wer), ("top1", AccuracyMetric::Top1), ("top5", AccuracyMetric::Top5)];
}

impl AccuracyMetric {
    pub fn as_str(self) -> &'static str {
        self.name()
    }

    /// Perplexity and WER get worse as they rise; top-k accuracy as it falls.
    pub fn lower_is_better(self) -> bool {
        matches!(self, AccuracyMetric::Perplexity | AccuracyMetric::Wer)
    }

    /// The runner templates whose programs this metric evaluates: the runner tells what the
    /// program computes (next-token logits, transcripts, class scores).
    pub fn runners(self) -> &'static [&'static str] {
        match self {
            AccuracyMetric::Perplexity => &["llm"],
            AccuracyMetric::Wer => &["asr"],
            // Classifier firmware runs the same image programs.
            AccuracyMetric::Top1 | AccuracyMetric::Top5 => &["image-classifier", "firmware"],
        }
    }

    /// Perplexity reads one text file; the others a folder of samples.
    fn data_is_folder(self) -> bool {
        self != AccuracyMetric::Perplexity
    }

    /// How much worse `built` is than `reference`, relative to the reference: positive when
    /// worse (perplexity or WER up, top-k down), negative when better.
    pub fn regression(self, reference: f64, built: f64) -> f64 {
        let worse_by = if self.lower_is_better() { built - reference } else { reference - built };
        if reference == 0.0 {
            // A perfect WER (0) or a zero top-k: any worsening is unbounded, none is 0.
            return if worse_by > 0.0 { f64::INFINITY } else { 0.0 };
        }
        worse_by / reference.abs()
    }
}

/// The program the built one is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccuracyReference {
    /// The recipe exported from the same weights with `quantize "none"` (and no embedding
    /// quantization), float32, otherwise unchanged (same max-seq-len, input shape, …).
    Fp32,
}

impl Choice for AccuracyReference {
    const WHAT: &'static str = "accuracy reference";
    const ALL: &'static [(&'static str, Self)] = &[("fp32", AccuracyReference::Fp32)];
}

/// A decoded `accuracy` block.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracySpec {
    /// The held-out set: a text file (perplexity) or a folder (wer, top1, top5), resolved
    /// against the recipe's folder.
    pub data: PathBuf,
    pub metric: AccuracyMetric,
    pub reference: AccuracyReference,
    /// The largest allowed relative regression (`"2%"` is 0.02).
    pub max_regression: f64,
    /// Perplexity: tokens per chunk (default: the program's context, at most 512).
    pub ctx: Option<usize>,
    /// The `accuracy` node's name, the metric's value and `ctx`'s node, for later diagnostics.
    pub span: SourceSpan,
    pub metric_span: SourceSpan,
    pub ctx_span: Option<SourceSpan>,
}

pub(crate) const ACCURACY: &[&str] = &["data", "metric", "reference", "max-regression", "ctx"];

/// The smallest chunk llama-perplexity's scoring leaves a token to score in
/// (positions n/2 … n-2).
pub const MIN_CTX: usize = 3;

/// Decodes `accuracy { … }` inside `verify`; paths are relative to `base`.
pub(crate) fn accuracy(d: &mut Decoder, node: &KdlNode, base: &Path) -> Option<AccuracySpec> {
    for extra in d.args(node, ACCURACY) {
        d.error(extra.span(), "`accuracy` takes no values", "unexpected value", "put its settings in its block: `accuracy { data \"eval.txt\"; metric \"perplexity\"; reference \"fp32\"; max-regression \"2%\" }`");
    }
    let fields = d.fields(Parent::Node(node), node.children(), ACCURACY, &[]);
    let metric = d
        .require(&fields, Parent::Node(node), "metric", "`metric \"perplexity\"` (or `wer`, `top1`, `top5`)")
        .and_then(|n| d.string(n))
        .and_then(|s| d.choice::<AccuracyMetric>(&s).map(|m| (m, s.span)));
    let reference = d
        .require(&fields, Parent::Node(node), "reference", "`reference \"fp32\"`")
        .and_then(|n| d.string(n))
        .and_then(|s| d.choice::<AccuracyReference>(&s));
    let max_regression = d
        .require(&fields, Parent::Node(node), "max-regression", "`max-regression \"2%\"`")
        .and_then(|n| percentage(d, n));
    let ctx = match fields.get("ctx") {
        Some(n) => d.int(n, MIN_CTX as i128, i128::from(u32::MAX)).map(|c| Some((c.value as usize, n.name().span()))),
        None => Some(None),
    };
    let data_node = d.require(&fields, Parent::Node(node), "data", "`data \"eval/wiki.txt\"` (a text file, or a folder of audio or images)");
    let data_text = data_node.and_then(|n| d.string(n));
    let (metric, span) = metric?;
    if let (AccuracyMetric::Wer | AccuracyMetric::Top1 | AccuracyMetric::Top5, Some(Some((_, ctx_span)))) = (metric, &ctx) {
        d.error(*ctx_span, "`ctx` applies to the `perplexity` metric only", "not for this metric", format!("`{}` reads whole samples: remove `ctx`", metric.as_str()));
        return None;
    }
    let data = data_text.and_then(|text| match check_data(&text.value, base, metric) {
        Ok(path) => Some(path),
        Err((message, label)) => {
            d.error(text.span, message, label, data_help(metric));
            None
        }
    });
    let ctx = ctx?;
    Some(AccuracySpec {
        data: data?,
        metric,
        reference: reference?,
        max_regression: max_regression?,
        ctx: ctx.map(|(c, _)| c),
        span: node.name().span(),
        metric_span: span,
        ctx_span: ctx.map(|(_, s)| s),
    })
}

/// `"2%"` as 0.02: a non-negative percentage, written with its `%` so nobody wonders whether
/// `0.02` meant 2% or 0.02%.
fn percentage(d: &mut Decoder, node: &KdlNode) -> Option<f64> {
    let name = node.name().value().to_string();
    let bare = match node.entries().first().map(|e| (e.value(), e.span())) {
        Some((KdlValue::Integer(i), span)) => Some((i.to_string(), span)),
        Some((KdlValue::Float(f), span)) => Some((f.to_string(), span)),
        _ => None,
    };
    let text = match bare {
        Some((written, span)) => {
            d.error(span, format!("`{name}` expects a percentage, found a bare number"), "no `%`", format!("write it as a quoted percentage: `{name} \"{written}%\"`"));
            return None;
        }
        _ => d.string(node)?,
    };
    let parsed = text.value.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).filter(|p| p.is_finite());
    match parsed {
        Some(p) if p >= 0.0 => Some(p / 100.0),
        Some(_) => {
            d.error(text.span, format!("`{name}` must not be negative, found `{}`", text.value), "negative", "a regression limit is how much worse the built program may be: e.g. `\"2%\"` (`\"0%\"`: no worse at all)");
            None
        }
        None => {
            d.error(text.span, format!("`{name}` expects a percentage like \"2%\", found `{}`", text.value), "not a percentage", "write a number followed by `%`, e.g. `\"2%\"` or `\"0.5%\"`");
            None
        }
    }
}

/// The data path, resolved, when it names what `metric` reads; else (message, label).
fn check_data(text: &str, base: &Path, metric: AccuracyMetric) -> Result<PathBuf, (String, &'static str)> {
    let path = resolve_path(text, base).map_err(|_| ("cannot expand `~`: HOME is not set".to_string(), "starts with ~"))?;
    let what = if metric.data_is_folder() { "folder" } else { "file" };
    if !path.exists() {
        return Err((format!("accuracy data {what} `{}` does not exist", path.display()), if metric.data_is_folder() { "no such folder" } else { "no such file" }));
    }
    match (metric.data_is_folder(), path.is_dir()) {
        (true, false) => Err((format!("accuracy data `{}` is not a folder; `{}` reads a folder", path.display(), metric.as_str()), "not a folder")),
        (false, true) => Err((format!("accuracy data `{}` is a folder; `perplexity` reads one text file", path.display()), "not a file")),
        _ => Ok(path),
    }
}

fn data_help(metric: AccuracyMetric) -> &'static str {
    match metric {
        AccuracyMetric::Perplexity => "give a UTF-8 text file (absolute, ~/…, or relative to the recipe's folder)",
        AccuracyMetric::Wer => "give a folder of `NAME.wav` files, each with its transcript `NAME.txt` (absolute, ~/…, or relative to the recipe's folder)",
        AccuracyMetric::Top1 | AccuracyMetric::Top5 => {
            "give a folder with one subfolder per class (named by its label or class index) holding PNG/JPEG images (absolute, ~/…, or relative to the recipe's folder)"
        }
    }
}

/// Checks an accuracy block against the rest of the recipe: the metric must fit the program
/// the runner runs, the reference must be exportable, `ctx` must fit the context.
pub(crate) fn check_against(d: &mut Decoder, a: &AccuracySpec, model: &ModelSpec, runner: &RunnerSpec) {
    let wanted = a.metric.runners();
    if !wanted.contains(&runner.template.as_str()) {
        let fits: Vec<String> =
            AccuracyMetric::ALL.iter().filter(|(_, m)| m.runners().contains(&runner.template.as_str())).map(|(n, _)| format!("`{n}`")).collect();
        let help = if fits.is_empty() {
            format!("the `{}` runner has no accuracy metric yet: remove `accuracy`", runner.template)
        } else {
            format!("this recipe's runner `{}` takes {}", runner.template, fits.join(" or "))
        };
        let problem = d
            .source
            .problem(a.metric_span, format!("metric `{}` measures `{}` programs, but this recipe's runner is `{}`", a.metric.as_str(), wanted[0], runner.template), "does not fit the model")
            .also(runner.span, "the runner")
            .help(help);
        d.report(problem);
    }
    if model.is_prebuilt() {
        d.error(
            a.span,
            "a prebuilt program has no weights to export the `fp32` reference from",
            "reference cannot be built",
            "export the float32 program from the same weights elsewhere and compare with `rbuild eval`, or remove `accuracy`",
        );
    }
    if let (Some(ctx), Some(span), Some(llm)) = (a.ctx, a.ctx_span, &model.llm) {
        let max = llm.max_seq_len.value();
        if ctx > max {
            d.error(span, format!("`ctx` {ctx} is longer than the model's `max-seq-len` {max}"), "longer than the context", format!("use at most {max} (a chunk is evaluated in one context)"));
        }
    }
}
