//! `whisper_runner --model model.pte --audio speech.wav`: transcribe (or translate) a WAV file
//! with a Whisper program, streaming the text to stdout, with a stats line on stderr, subtitle
//! or JSON files, or one JSON object on stdout with `--json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use rbuild_asr_runner::decode::Task;
use rbuild_asr_runner::output::{self, Format};
use rbuild_asr_runner::program::WhisperProgram;
use rbuild_asr_runner::stats::Stats;
use rbuild_asr_runner::tokenizer::{self, Text};
use rbuild_asr_runner::transcribe::{self, Geometry, Options};
use rbuild_asr_runner::{audio, kernels, verify};
use rbuild_runner_support::cli::{self, emit};
use rbuild_runner_support::{in_file, program, protocol, Failure, Outcome};

#[derive(Parser)]
#[command(
    name = "whisper_runner",
    about = "Transcribe speech with a Whisper program (ExecuTorch-compatible .pte)",
    after_help = "whisper.cpp spellings also work: -otxt -osrt -ovtt -oj (output format), -tr (translate)."
)]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The WAV file (8/16/24/32-bit integer or 32-bit float PCM, any rate and channel count).
    #[arg(long, required_unless_present_any = ["verify_input", "list_kernels"])]
    audio: Option<PathBuf>,
    /// Hugging Face tokenizer.json or a tiktoken file (multilingual.tiktoken, gpt2.tiktoken);
    /// without one the token ids are printed.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Spoken language code (en, de, …) or `auto` to detect it on the first window.
    #[arg(short = 'l', long, default_value = "en")]
    language: String,
    /// transcribe, or translate into English.
    #[arg(long, default_value = "transcribe", value_parser = ["transcribe", "translate"])]
    task: String,
    /// Predict timestamps: segments split where the model places them.
    #[arg(long)]
    timestamps: bool,
    /// txt, srt, vtt or json (written to --output, else to stdout).
    #[arg(long, default_value = "txt", value_parser = ["txt", "srt", "vtt", "json"])]
    output_format: String,
    /// Write the transcript in --output-format to this file (whole or not at all).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Threads kernels may use.
    #[arg(short = 't', long, default_value_t = 1)]
    threads: usize,
    /// Where GPU-delegated parts of the program run: auto (the GPU when one is found, else the
    /// CPU reference runtime, with a notice), gpu, cpu, or part of an adapter's name.
    #[arg(long, default_value = "auto")]
    device: String,
    /// First decoding temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    temperature: f32,
    /// Temperature step of the fallback when a window's text is repetitive or unlikely.
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
    temperature_inc: f32,
    /// No temperature fallback.
    #[arg(long)]
    no_fallback: bool,
    /// Seed for sampling at temperatures above 0.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tokens to sample per window at most (besides the decoder's context).
    #[arg(long)]
    max_new_tokens: Option<usize>,
    /// Do not prompt each window with the previous windows' text.
    #[arg(long)]
    no_context: bool,
    /// Print one JSON object (text, segments, tokens, language, stats) instead of text.
    #[arg(long)]
    json: bool,
    /// Read the program into memory instead of mapping the file.
    #[arg(long)]
    no_mmap: bool,
    /// Run preprocessor, encoder and 8 greedy tokens on `input.0` of this safetensors file
    /// (f32 PCM) and print `RBUILD_OUTPUT`/`RBUILD_STATS` lines (`rbuild verify`).
    #[arg(long)]
    verify_input: Option<PathBuf>,
    /// Print the registered kernels' op names, one per line, and exit.
    #[arg(long)]
    list_kernels: bool,
}

/// whisper.cpp's multi-letter single-dash flags, which clap cannot declare, as long options.
fn whisper_cpp_aliases(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.map(|a| {
        let alias = match a.to_str() {
            Some("-otxt") => "--output-format=txt",
            Some("-osrt") => "--output-format=srt",
            Some("-ovtt") => "--output-format=vtt",
            Some("-oj" | "-ojf") => "--output-format=json",
            Some("-tr") => "--task=translate",
            _ => return a,
        };
        alias.into()
    })
    .collect()
}

fn main() -> ExitCode {
    cli::main(whisper_cpp_aliases(std::env::args_os()), run)
}

fn check_args(a: &Args) -> Outcome {
    if !(a.temperature.is_finite() && (0.0..=1.0).contains(&a.temperature)) {
        return Err(Failure(format!("--temperature must be in [0, 1], got {}", a.temperature)));
    }
    if !(a.temperature_inc.is_finite() && a.temperature_inc >= 0.0) {
        return Err(Failure(format!("--temperature-inc must be a number ≥ 0, got {}", a.temperature_inc)));
    }
    cli::check_threads(a.threads)?;
    if a.max_new_tokens == Some(0) {
        return Err(Failure("--max-new-tokens must be at least 1".into()));
    }
    Ok(())
}

fn run(a: Args) -> Outcome {
    if a.list_kernels {
        return cli::print_kernel_ops(&kernels::registry());
    }
    check_args(&a)?;
    // The audio first: a bad file fails before the (possibly large) program is touched.
    let decoded = match &a.audio {
        Some(p) if a.verify_input.is_none() => Some((p.clone(), audio::read_wav(p).map_err(Failure)?)),
        _ => None,
    };

    let t_load = Instant::now();
    let file = program::open(a.model.as_deref(), !a.no_mmap, rbuild_runner_support::embedded_program!())?;
    let prog = file.load()?;
    let model_name = file.name();
    let registry = kernels::registry();
    let (backends, _device) = rbuild_runner_support::gpu::backends_for(&a.device, &prog).map_err(Failure)?;
    let mut model = in_file(WhisperProgram::load(&prog, &registry, &backends, a.threads), model_name)?;
    let vocab = model.meta.vocab.clone();
    let language = in_file(vocab.resolve_language(&a.language), model_name)?;
    let task = if a.task == "translate" { Task::Translate } else { Task::Transcribe };
    in_file(vocab.check_task(task), model_name)?;
    if a.timestamps && vocab.timestamp_begin.is_none() {
        return Err(Failure(format!(
            "--timestamps: {} has no timestamp tokens (no get_timestamp_begin method)",
            model_name.display()
        )));
    }

    if let Some(path) = &a.verify_input {
        return verify_run(&mut model, path, model_name, language, task, a.threads);
    }

    let tok = match &a.tokenizer {
        Some(p) => {
            let t = tokenizer::load(p).map_err(Failure)?;
            tokenizer::check_matches(t.as_ref(), &vocab)
                .map_err(|e| Failure(format!("{} and {}: {e}", p.display(), model_name.display())))?;
            Some(t)
        }
        None => None,
    };
    let text = Text { tokenizer: tok, eot: vocab.eot, vocab_size: vocab.vocab_size };
    let load_time = t_load.elapsed();

    let (audio_path, wav) = decoded.ok_or_else(|| Failure("--audio is required".into()))?;
    let rate = model.meta.sample_rate;
    let pcm = in_file(audio::resample(&wav.samples, wav.sample_rate, rate), &audio_path)?;
    let audio_s = pcm.len() as f64 / rate as f64;
    if pcm.len() > model.max_content_samples() {
        return Err(Failure(format!(
            "{}: the audio is {audio_s:.2} s long; {} takes at most {:.2} s ({} samples at {rate} Hz, one window of \
             padding included)",
            audio_path.display(),
            model_name.display(),
            model.max_content_samples() as f64 / rate as f64,
            model.meta.max_audio_samples
        )));
    }

    let t_run = Instant::now();
    let content_frames = in_file(model.compute_features(&pcm), model_name)?;
    let geo = Geometry {
        content_frames,
        frames_per_window: model.meta.frames_per_window,
        frame_seconds: model.meta.frame_seconds(),
    };
    let step = if a.no_fallback { 0.0 } else { a.temperature_inc };
    let opts = Options {
        task,
        language,
        timestamps: a.timestamps,
        temperatures: transcribe::fallback_temperatures(a.temperature, step),
        condition_on_previous_text: !a.no_context,
        max_new_tokens: a.max_new_tokens,
        seed: a.seed,
        ..Options::default()
    };
    let format = Format::parse(&a.output_format)?;
    // Text goes to stdout as it is decoded, unless stdout carries JSON or a subtitle file.
    let stream = !a.json && (format == Format::Txt || a.output.is_some());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut on_segment = |s: &transcribe::Segment| -> Result<(), String> {
        if !stream {
            return Ok(());
        }
        let line = if a.timestamps {
            format!("[{} --> {}]  {}\n", output::timestamp(s.start, '.'), output::timestamp(s.end, '.'), s.text.trim())
        } else {
            format!("{}\n", s.text.trim())
        };
        emit(&mut out, &line)
    };
    let several = content_frames > geo.frames_per_window;
    let duration = geo.duration();
    let mut progress = |k: usize, n: usize, t: f64| {
        if several {
            eprintln!("[window {k}/{n}] {} / {}", clock(t), clock(duration));
        }
    };
    let result = transcribe::transcribe(&mut model, &vocab, geo, &opts, &text, &mut on_segment, &mut progress);
    let tr = in_file(result, model_name)?;
    let stats = Stats::new(load_time, audio_s, t_run.elapsed(), &model.timing);
    let lang = tr.language.and_then(|l| vocab.lang_code(l)).map(str::to_string);
    let mut stats_json = stats.to_json();
    stats_json["fallbacks"] = tr.fallbacks.into();
    stats_json["skipped_windows"] = tr.skipped_windows.into();

    if let Some(path) = &a.output {
        rbuild_runner_support::fs::write_atomic(path, output::render(format, &tr.segments, lang.as_deref(), stats_json.clone()).as_bytes())?;
    }
    if a.json {
        emit(&mut out, &format!("{}\n", output::json(&tr.segments, lang.as_deref(), stats_json)))?;
    } else {
        if a.output.is_none() && format != Format::Txt {
            emit(&mut out, &output::render(format, &tr.segments, lang.as_deref(), stats_json))?;
        }
        if let Some(l) = &lang {
            if language.is_none() {
                eprintln!("detected language: {l}");
            }
        }
        eprintln!("{}", stats.line());
    }
    Ok(())
}

/// `MM:SS.mmm` (with hours when needed) for the progress line.
fn clock(s: f64) -> String {
    let ms = (s * 1000.0).round() as u64;
    if ms >= 3_600_000 {
        format!("{}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
    } else {
        format!("{:02}:{:02}.{:03}", ms / 60_000, ms / 1000 % 60, ms % 1000)
    }
}

/// `--verify-input`: features of the first window, its encoder output and up to 8 greedy
/// tokens from the default prompt, printed in the `rbuild verify` protocol.
fn verify_run(
    model: &mut WhisperProgram<'_>,
    path: &Path,
    model_name: &Path,
    language: Option<u32>,
    task: Task,
    threads: usize,
) -> Outcome {
    let bytes = in_file(std::fs::read(path), path)?;
    let pcm = in_file(verify::read_pcm(&bytes), path)?;
    let t = Instant::now();
    let outputs = in_file(verify::outputs(model, &pcm, language, task), model_name)?;
    protocol::print_outputs(&outputs, t.elapsed().as_micros(), threads);
    Ok(())
}
