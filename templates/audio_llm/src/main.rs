//! `voxtral_runner --model model.pte --tokenizer tekken.json --audio speech.wav [--prompt "…"]`:
//! transcribe a WAV file, or answer a question about it, with a Voxtral-style program,
//! streaming the text to stdout with a stats line on stderr (or one JSON object with `--json`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use rbuild_audio_llm_runner::program::VoxtralProgram;
use rbuild_audio_llm_runner::{kernels, prompt, verify};
use rbuild_runner_support::cli::{self, emit};
use rbuild_runner_support::text::generate::{self, GenConfig, Model, Stats};
use rbuild_runner_support::text::sampling::Sampler;
use rbuild_runner_support::text::stream::TextStream;
use rbuild_runner_support::text::{tokenizer, Tokenizer};
use rbuild_runner_support::{audio, in_file, program, protocol, Failure, Outcome};

#[derive(Parser)]
#[command(name = "voxtral_runner", about = "Transcribe audio, or answer questions about it, with a Voxtral-style program (ExecuTorch-compatible .pte)")]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Mistral's tekken.json (or a Hugging Face tokenizer.json); without one, give
    /// --prompt-ids and the token ids are printed.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// The WAV file (8/16/24/32-bit integer or 32-bit float PCM, any rate and channel count).
    #[arg(long, required_unless_present_any = ["verify_input", "list_kernels"])]
    audio: Option<PathBuf>,
    /// A question or instruction about the audio; without one the audio is transcribed.
    #[arg(long, conflicts_with = "prompt_ids")]
    prompt: Option<String>,
    /// The prompt as token ids (comma-separated; the word `audio` stands for the audio tokens),
    /// e.g. "1,3,25,audio,4,34"; needs no tokenizer.
    #[arg(long)]
    prompt_ids: Option<String>,
    /// Language code of the speech for transcription (`lang:xx` in the prompt); none: the
    /// model decides.
    #[arg(short = 'l', long)]
    language: Option<String>,
    /// Tokens to generate at most (default: until the end token or the KV cache is full).
    #[arg(long)]
    max_new_tokens: Option<usize>,
    /// Sampling temperature (0 = greedy, recommended for transcription).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    temperature: f32,
    /// Nucleus sampling: the smallest set of tokens whose probability reaches P.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    top_p: f32,
    /// Seed for sampling at temperatures above 0.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Threads kernels may use.
    #[arg(short = 't', long, default_value_t = 1)]
    threads: usize,
    /// Where GPU-delegated parts of the program run: auto, gpu, cpu, or part of an adapter's name.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Print one JSON object (text, token ids, audio, stats) instead of streamed text.
    #[arg(long)]
    json: bool,
    /// Read the program into memory instead of mapping the file.
    #[arg(long)]
    no_mmap: bool,
    /// Run preprocessor, audio encoder and 8 greedy tokens on `input.0` of this safetensors file
    /// (f32 PCM) and print `RBUILD_OUTPUT`/`RBUILD_STATS` lines (`rbuild verify`).
    #[arg(long)]
    verify_input: Option<PathBuf>,
    /// Print the registered kernels' op names, one per line, and exit.
    #[arg(long)]
    list_kernels: bool,
}

fn main() -> std::process::ExitCode {
    cli::main(std::env::args_os(), run)
}

fn check_args(a: &Args) -> Outcome {
    if !(a.temperature.is_finite() && a.temperature >= 0.0) {
        return Err(Failure(format!("--temperature must be a number ≥ 0, got {}", a.temperature)));
    }
    if !(a.top_p.is_finite() && a.top_p > 0.0 && a.top_p <= 1.0) {
        return Err(Failure(format!("--top-p must be in (0, 1], got {}", a.top_p)));
    }
    cli::check_threads(a.threads)?;
    if a.max_new_tokens == Some(0) {
        return Err(Failure("--max-new-tokens must be at least 1".into()));
    }
    if a.tokenizer.is_none() && a.prompt_ids.is_none() && a.verify_input.is_none() {
        return Err(Failure("give --tokenizer (tekken.json), or the prompt as --prompt-ids".into()));
    }
    Ok(())
}

fn run(a: Args) -> Outcome {
    if a.list_kernels {
        return cli::print_kernel_ops(&kernels::registry());
    }
    check_args(&a)?;
    // The audio and tokenizer first: a bad file fails before the (possibly large) program loads.
    let wav = match &a.audio {
        Some(p) if a.verify_input.is_none() => Some((p.clone(), audio::read_wav(p).map_err(Failure)?)),
        _ => None,
    };
    let tok = match &a.tokenizer {
        Some(p) if a.verify_input.is_none() => Some((p.clone(), tokenizer::load(p).map_err(|e| Failure(e.0))?)),
        _ => None,
    };

    let t_load = Instant::now();
    let file = program::open(a.model.as_deref(), !a.no_mmap, rbuild_runner_support::embedded_program!())?;
    let prog = file.load()?;
    let model_name = file.name();
    let registry = kernels::registry();
    let (backends, _device) = rbuild_runner_support::gpu::backends_for(&a.device, &prog).map_err(Failure)?;
    let mut model = in_file(VoxtralProgram::load(&prog, &registry, &backends, a.threads), model_name)?;
    if let Some(path) = &a.verify_input {
        let bytes = in_file(std::fs::read(path), path)?;
        let pcm = in_file(protocol::read_pcm(&bytes), path)?;
        let t = Instant::now();
        let outputs = in_file(verify::outputs(&mut model, &pcm), model_name)?;
        protocol::print_outputs(&outputs, t.elapsed().as_micros(), a.threads);
        return Ok(());
    }
    let load_time = t_load.elapsed();

    let (audio_path, wav) = wav.ok_or_else(|| Failure("--audio is required".into()))?;
    let rate = model.audio.sample_rate;
    let pcm = in_file(audio::resample(&wav.samples, wav.sample_rate, rate), &audio_path)?;
    let audio_s = pcm.len() as f64 / f64::from(rate);
    let t_audio = Instant::now();
    let (shape, features) = in_file(model.features(&pcm), &audio_path)?;
    let audio_emb = in_file(model.encode_audio(&shape, &features), model_name)?;
    let audio_time = t_audio.elapsed();
    let (chunks, n_audio) = (shape[0], shape[0] * model.audio.tokens_per_chunk);

    let audio_id = model.audio.audio_token_id;
    let prompt = match (&a.prompt_ids, &tok) {
        (Some(ids), _) => prompt::from_ids(ids, audio_id, n_audio).map_err(Failure)?,
        (None, Some((path, t))) => {
            let bos = model.text.bos_id.or_else(|| t.token_to_id("<s>")).ok_or_else(|| Failure(format!("{}: no <s> token", path.display())))?;
            let built = match &a.prompt {
                Some(q) => prompt::question(t.as_ref(), bos, audio_id, n_audio, q),
                None => prompt::transcription(t.as_ref(), bos, audio_id, n_audio, a.language.as_deref()),
            };
            built.map_err(|e| Failure(format!("{}: {e}", path.display())))?
        }
        (None, None) => unreachable!("check_args requires a tokenizer or --prompt-ids"),
    };
    if let Some(v) = model.text.vocab_size {
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= v) {
            return Err(Failure(format!("the prompt has token id {bad}, but {} has a vocabulary of {v}", model_name.display())));
        }
    }
    let max_context = in_file(model.max_context(), model_name)?;
    let max_new = a.max_new_tokens.unwrap_or_else(|| max_context.saturating_sub(prompt.len()).max(1));
    generate::check_budget(prompt.len(), max_new, max_context).map_err(|e| Failure(format!("{}: {e}", model_name.display())))?;
    let mut eos_ids = model.text.eos_ids.clone();
    if eos_ids.is_empty() {
        eos_ids.extend(tok.as_ref().and_then(|(_, t)| t.token_to_id("</s>")));
    }
    let cfg = GenConfig { max_new_tokens: max_new, max_context, eos_ids, ignore_eos: false };
    let mut sampler = Sampler::new(a.temperature, a.top_p, a.seed);

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut stream = TextStream::new(&prompt, true);
    let mut text_out = String::new();
    let json = a.json;
    let tok_ref: Option<(&Path, &dyn Tokenizer)> = tok.as_ref().map(|(p, t)| (p.as_path(), t.as_ref()));
    let mut on_token = |id: u32| -> Result<(), String> {
        let piece = match tok_ref {
            Some((path, t)) => stream.push(t, id).map_err(|e| format!("{}: {}", path.display(), e.0))?,
            None => format!("{id} "),
        };
        if !piece.is_empty() {
            if !json {
                emit(&mut out, &piece)?;
            }
            text_out.push_str(&piece);
        }
        Ok(())
    };
    let mut decoder = model.decoder(&audio_emb);
    let gen = in_file(generate::generate(&mut decoder as &mut dyn Model, &prompt, &mut sampler, &cfg, &mut on_token), model_name)?;
    let rest = match tok_ref {
        Some((path, t)) => stream.finish(t).map_err(|e| Failure(format!("{}: {}", path.display(), e.0)))?,
        None => String::new(),
    };
    text_out.push_str(&rest);
    let stats = Stats::new(load_time, prompt.len(), &gen, rbuild_runner_support::stats::peak_rss_bytes());
    let audio_ms = audio_time.as_secs_f64() * 1e3;
    if json {
        let mut stats_json = stats.to_json();
        stats_json["audio_ms"] = serde_json::json!(audio_ms);
        let obj = serde_json::json!({
            "text": text_out.trim(),
            "prompt_token_ids": prompt,
            "generated_token_ids": gen.generated,
            "stop": if gen.hit_eos { "eos" } else { "length" },
            "audio": { "seconds": audio_s, "chunks": chunks, "audio_tokens": n_audio },
            "seed": a.seed,
            "stats": stats_json,
        });
        emit(&mut out, &format!("{obj}\n"))?;
    } else {
        emit(&mut out, &format!("{rest}\n"))?;
        eprintln!("audio {audio_s:.2} s in {chunks} chunk(s), {n_audio} audio tokens, log-mel + encoder {audio_ms:.1} ms; {}", stats.line());
    }
    Ok(())
}
