//! `llama_runner --model model.pte --tokenizer tokenizer.json --prompt "…"`: generate text with
//! an ExecuTorch-compatible LLM program, streaming it to stdout, with a stats line on stderr
//! (or one JSON object on stdout with `--json`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use rbuild_llm_runner::generate::{self, GenConfig, Model, Stats};
use rbuild_llm_runner::sampling::Sampler;
use rbuild_llm_runner::stream::TextStream;
use rbuild_llm_runner::{chat, kernels, program, tokenizer};
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::Program;

#[derive(Parser)]
#[command(name = "llama_runner", about = "Generate text with an ExecuTorch-compatible LLM program")]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Hugging Face tokenizer.json or a tiktoken rank file (detected by content).
    #[arg(long, required_unless_present = "list_kernels")]
    tokenizer: Option<PathBuf>,
    /// The prompt text.
    #[arg(long, conflicts_with = "prompt_file", required_unless_present_any = ["prompt_file", "list_kernels"])]
    prompt: Option<String>,
    /// Read the prompt from this file instead.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// Tokens to generate at most (default: until the program's context is full).
    #[arg(long)]
    max_new_tokens: Option<usize>,
    /// Sampling temperature; 0 picks the most likely token.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    temperature: f32,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass (0 < p ≤ 1).
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true)]
    top_p: f32,
    /// Random seed for sampling (default: from the clock; the one used is in --json output).
    #[arg(long)]
    seed: Option<u64>,
    /// Tokens per prefill call (default: as many as the program takes); smaller chunks use
    /// less memory for long prompts.
    #[arg(long)]
    prefill_chunk: Option<usize>,
    /// Threads kernels may use.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Wrap the prompt in the chat template of tokenizer_config.json beside the tokenizer.
    #[arg(long)]
    chat: bool,
    /// Read the program into memory instead of mapping the file (slower start; anonymous
    /// memory may get huge pages, and the file may change on disk while running).
    #[arg(long)]
    no_mmap: bool,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Run the whole generation once, silently and untimed, before the reported run (for
    /// benchmarks: first-touch page faults and cold caches stay out of the figures).
    #[arg(long)]
    warmup: bool,
    /// Print the prompt before the generated text.
    #[arg(long)]
    echo: bool,
    /// Print one JSON object (token ids, text, stats) instead of streaming text.
    #[arg(long)]
    json: bool,
    /// Print the registered kernels' op names, one per line, and exit.
    #[arg(long)]
    list_kernels: bool,
}

/// A user-facing failure: the message names the file or argument concerned.
struct Failure(String);

type Outcome<T = ()> = Result<T, Failure>;

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure(s)
    }
}

/// Prefixes an error with the file it concerns.
fn in_file<T, E: std::fmt::Display>(r: Result<T, E>, path: &Path) -> Outcome<T> {
    r.map_err(|e| Failure(format!("{}: {e}", path.display())))
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // --help/--version go to stdout with success; usage errors exit 1 like every other
            // failure of this runner.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// The program compiled in with `--features embed-program` (16-aligned, as the runtime views
/// constants in place).
#[cfg(rbuild_embedded)]
fn embedded_program() -> Option<&'static [u8]> {
    #[repr(C, align(16))]
    struct Aligned<T: ?Sized>(T);
    static PROGRAM: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/program.pte")));
    Some(&PROGRAM.0)
}

#[cfg(not(rbuild_embedded))]
fn embedded_program() -> Option<&'static [u8]> {
    None
}

/// The program's bytes: mapped from the file (page-aligned; weights are paged in as the first
/// calls touch them, so loading a multi-GB model takes milliseconds), or read into an aligned
/// buffer where the file cannot be mapped (pipes, some network file systems).
enum ProgramBytes {
    Mapped(memmap2::Mmap),
    Read(AlignedBuf),
}

impl ProgramBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            ProgramBytes::Mapped(m) => m,
            ProgramBytes::Read(b) => b.as_slice(),
        }
    }
}

fn read_program(path: &Path, mmap: bool) -> Outcome<ProgramBytes> {
    use std::io::Read;
    let mut f = in_file(std::fs::File::open(path), path)?;
    let len = in_file(f.metadata(), path)?.len();
    if mmap && len > 0 {
        // SAFETY: the map is only read, and lives as long as the program borrowed from it. A
        // file truncated by another process while mapped would fault on access (as with any
        // mmap-based loader, llama.cpp's included); rbuild writes programs by rename, so its
        // own rebuilds never truncate a mapped file.
        if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
            return Ok(ProgramBytes::Mapped(m));
        }
    }
    let mut buf = usize::try_from(len)
        .ok()
        .and_then(AlignedBuf::try_zeroed)
        .ok_or_else(|| Failure(format!("{}: cannot allocate {len} bytes for the program", path.display())))?;
    in_file(f.read_exact(buf.as_mut_slice()), path)?;
    Ok(ProgramBytes::Read(buf))
}

fn check_args(a: &Args) -> Outcome {
    if !(a.temperature.is_finite() && a.temperature >= 0.0) {
        return Err(Failure(format!("--temperature must be a number ≥ 0, got {}", a.temperature)));
    }
    if !(a.top_p > 0.0 && a.top_p <= 1.0) {
        return Err(Failure(format!("--top-p must be in (0, 1], got {}", a.top_p)));
    }
    if a.threads == 0 {
        return Err(Failure("--threads must be at least 1".into()));
    }
    if a.max_new_tokens == Some(0) {
        return Err(Failure("--max-new-tokens must be at least 1".into()));
    }
    Ok(())
}

/// stdout, failing (not panicking) when it is closed.
fn emit(out: &mut impl Write, text: &str) -> Result<(), String> {
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| format!("stdout: {e}"))
}

fn run(a: Args) -> Outcome {
    if a.list_kernels {
        for op in kernels::registry().ops() {
            println!("{op}");
        }
        return Ok(());
    }
    check_args(&a)?;
    let tok_path = a.tokenizer.clone().ok_or_else(|| Failure("--tokenizer is required".into()))?;
    let prompt_text = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => in_file(std::fs::read_to_string(f), f)?,
        (None, None) => return Err(Failure("--prompt or --prompt-file is required".into())),
    };

    let t_load = Instant::now();
    let owned;
    let (program_bytes, model_name): (&[u8], PathBuf) = match (&a.model, embedded_program()) {
        (Some(p), _) => {
            owned = read_program(p, !a.no_mmap)?;
            (owned.as_slice(), p.clone())
        }
        (None, Some(bytes)) => (bytes, PathBuf::from("<embedded program>")),
        (None, None) => {
            let why = if cfg!(feature = "embed-program") {
                " (built with embed-program, but RBUILD_EMBED_PROGRAM was not set)"
            } else {
                ""
            };
            return Err(Failure(format!("--model is required: this binary has no embedded program{why}")));
        }
    };
    let prog = in_file(Program::load(program_bytes), &model_name)?;
    let registry = kernels::registry();
    let (mut model, meta) = in_file(program::load_model(&prog, &registry, a.threads), &model_name)?;
    // The whole sequence must fit the KV cache (get_max_context_len; older programs have only
    // get_max_seq_len) or, without a cache, one call.
    let max_context = match (model.uses_kv_cache(), meta.max_context_len.or(meta.max_seq_len)) {
        (true, Some(n)) => n,
        _ => model.max_tokens_per_call(),
    };
    if let Some(n) = a.prefill_chunk {
        model.limit_tokens_per_call(n).map_err(|e| Failure(format!("--prefill-chunk {n}: {}: {e}", model_name.display())))?;
    }
    let tok = tokenizer::load(&tok_path).map_err(|e| Failure(e.0))?;
    let load_time = t_load.elapsed();

    let (text, add_special) = if a.chat {
        let tpl = chat::load_for_tokenizer(&tok_path)?;
        (tpl.render_user(&prompt_text)?, false)
    } else {
        (prompt_text.clone(), true)
    };
    let prompt = tok.encode(&text, add_special).map_err(|e| Failure(format!("{}: {}", tok_path.display(), e.0)))?;

    let max_new = match a.max_new_tokens {
        Some(n) => n,
        None => max_context.saturating_sub(prompt.len()).max(1),
    };
    in_file(generate::check_budget(prompt.len(), max_new, max_context), &model_name)?;
    if let Some(v) = meta.vocab_size {
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= v) {
            return Err(Failure(format!(
                "{}: the prompt has token id {bad}, but the program ({}) has a vocabulary of {v}: tokenizer and program do not match",
                tok_path.display(),
                model_name.display()
            )));
        }
    }
    let mut eos_ids = meta.eos_ids.clone();
    if eos_ids.is_empty() && !a.ignore_eos {
        // Programs without get_eos_ids: the tokenizer's usual end tokens.
        for name in ["</s>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>", "<|im_end|>"] {
            eos_ids.extend(tok.token_to_id(name));
        }
        if !a.json {
            eprintln!("warning: {} has no get_eos_ids method; stopping at the tokenizer's end tokens {eos_ids:?}", model_name.display());
        }
    }
    let cfg = GenConfig { max_new_tokens: max_new, max_context, eos_ids, ignore_eos: a.ignore_eos };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    let mut sampler = Sampler::new(a.temperature, a.top_p, seed);

    if a.warmup {
        // Its own sampler copy, so the reported run draws the same numbers as without
        // --warmup. The KV cache needs no reset: a run from position 0 overwrites every
        // entry it reads.
        let mut s = sampler.clone();
        in_file(generate::generate(&mut model as &mut dyn Model, &prompt, &mut s, &cfg, &mut |_| Ok(())), &model_name)?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.echo && !a.json {
        emit(&mut out, &prompt_text)?;
    }
    let mut stream = TextStream::new(&prompt, true);
    let mut text_out = String::new();
    let json = a.json;
    let tok_ref = tok.as_ref();
    let mut on_token = |id: u32| -> Result<(), String> {
        let piece = stream.push(tok_ref, id).map_err(|e| format!("{}: {}", tok_path.display(), e.0))?;
        if !piece.is_empty() {
            if !json {
                emit(&mut out, &piece)?;
            }
            text_out.push_str(&piece);
        }
        Ok(())
    };
    let gen = in_file(generate::generate(&mut model as &mut dyn Model, &prompt, &mut sampler, &cfg, &mut on_token), &model_name)?;
    let rest = stream.finish(tok_ref).map_err(|e| Failure(format!("{}: {}", tok_path.display(), e.0)))?;
    text_out.push_str(&rest);
    let stats = Stats::new(load_time, prompt.len(), &gen, generate::peak_rss_bytes());
    if json {
        let obj = serde_json::json!({
            "prompt_token_ids": prompt,
            "generated_token_ids": gen.generated,
            "text": text_out,
            "stop": if gen.hit_eos { "eos" } else { "length" },
            "seed": seed,
            "stats": stats.to_json(),
        });
        emit(&mut out, &format!("{obj}\n"))?;
    } else {
        emit(&mut out, &format!("{rest}\n"))?;
        eprintln!("{}", stats.line());
    }
    Ok(())
}
