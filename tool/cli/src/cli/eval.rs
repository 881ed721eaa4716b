//! `rbuild eval PROGRAM.pte (--text FILE [--ctx N] | --audio-dir DIR | --image-dir DIR)`: a
//! task metric of a built program on held-out data, on the host with every kernel rbuild has
//! (see `rbuild-eval`): perplexity for language models, word error rate for speech models,
//! top-1 / top-5 accuracy for image classifiers.

use std::path::{Path, PathBuf};

use rbuild_eval::{images, lm, report, speech, Report};
use rbuild_runtime::Program;

use crate::error::{bail, CliError, CliResult, InFile};
use crate::io::program::read_program;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// The .pte program.
    pub program: PathBuf,
    /// The tokenizer (language and speech models); default: tokenizer.json beside the program.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Perplexity (llama.cpp's llama-perplexity definition) over this UTF-8 text file.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["audio_dir", "image_dir"], conflicts_with_all = ["audio_dir", "image_dir"])]
    pub text: Option<PathBuf>,
    /// With --text: tokens per chunk (default: the program's context, at most 512).
    #[arg(long, requires = "text", value_name = "N")]
    pub ctx: Option<usize>,
    /// Word error rate over the NAME.wav files of this folder, each with its NAME.txt transcript.
    #[arg(long, value_name = "DIR", conflicts_with = "image_dir")]
    pub audio_dir: Option<PathBuf>,
    /// Top-1 / top-5 accuracy over DIR/<class>/*.png|jpg (a class named by its label or index).
    #[arg(long, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    /// With --image-dir: class names, one per line (line N names class N); default: labels.txt
    /// beside the program, when there is one.
    #[arg(long, requires = "image_dir", value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// Threads kernels may use.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Print one JSON object: metric, value and the counts it used.
    #[arg(long)]
    pub json: bool,
}

/// What to measure, on what.
#[derive(Clone, Debug)]
pub enum EvalData {
    /// Perplexity over a text file.
    Text { file: PathBuf, tokenizer: PathBuf, ctx: Option<usize> },
    /// Word error rate over a folder of WAV files with transcripts.
    Audio { dir: PathBuf, tokenizer: PathBuf },
    /// Top-1 / top-5 over a folder of class subfolders.
    Images { dir: PathBuf, labels: Option<PathBuf> },
}

pub fn eval(a: EvalArgs) -> CliResult {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let tokenizer = |what: &str| -> CliResult<PathBuf> {
        if let Some(t) = &a.tokenizer {
            return Ok(t.clone());
        }
        let beside = a.program.with_file_name("tokenizer.json");
        if beside.is_file() {
            return Ok(beside);
        }
        bail!("{what} needs --tokenizer FILE (no tokenizer.json beside {})", a.program.display())
    };
    let data = match (&a.text, &a.audio_dir, &a.image_dir) {
        (Some(file), _, _) => EvalData::Text { file: file.clone(), tokenizer: tokenizer("--text")?, ctx: a.ctx },
        (_, Some(dir), _) => EvalData::Audio { dir: dir.clone(), tokenizer: tokenizer("--audio-dir")? },
        (_, _, Some(dir)) => {
            let beside = a.program.with_file_name("labels.txt");
            EvalData::Images { dir: dir.clone(), labels: a.labels.clone().or_else(|| beside.is_file().then_some(beside)) }
        }
        _ => bail!("give --text FILE, --audio-dir DIR or --image-dir DIR"),
    };
    let r = measure(&a.program, &data, a.threads)?;
    if a.json {
        let mut obj = r.to_json();
        obj["program"] = a.program.display().to_string().into();
        println!("{obj}");
    } else {
        println!("{}: {}", a.program.display(), r.summary);
    }
    Ok(())
}

/// Measures `program` on `data`. Errors name the file they are about.
pub fn measure(program: &Path, data: &EvalData, threads: usize) -> CliResult<Report> {
    let bytes = read_program(program)?;
    let prog = Program::load(bytes.as_slice()).in_file(program)?;
    let kernels = rbuild_kernels::registry();
    // GPU and XNNPACK delegates run on their CPU reference runtimes here.
    let backends = crate::verify::reference_backends();
    match data {
        EvalData::Text { file, tokenizer, ctx } => {
            let bytes = std::fs::read(file).in_file(file)?;
            let text = String::from_utf8(bytes).map_err(|e| CliError(format!("{}: not UTF-8 text ({e})", file.display())))?;
            let tok = rbuild_runner_support::text::tokenizer::load(tokenizer).map_err(|e| CliError(e.0))?;
            let r = lm::perplexity(&prog, &kernels, &backends, tok.as_ref(), &text, *ctx, threads).map_err(|e| CliError(format!("{} on {}: {e}", program.display(), file.display())))?;
            Ok(report::perplexity(&r))
        }
        EvalData::Audio { dir, tokenizer } => {
            let recordings = speech::scan(dir).map_err(CliError)?;
            let files = speech::evaluate(&prog, &kernels, &backends, tokenizer, &recordings, threads).in_file(program)?;
            report::wer(&files).map_err(|e| CliError(format!("{}: {e}", dir.display())))
        }
        EvalData::Images { dir, labels } => {
            let labels = match labels {
                Some(p) => Some(rbuild_image_classifier::classify::parse_labels(&std::fs::read_to_string(p).in_file(p)?)),
                None => None,
            };
            let found = images::scan(dir, labels.as_deref()).map_err(CliError)?;
            let counts = images::evaluate(&prog, &kernels, &backends, &found, threads).in_file(program)?;
            Ok(report::top_k(&counts))
        }
    }
}
