//! `llama_runner --model model.pte --tokenizer tokenizer.json --prompt "…"`: generate text with
//! an ExecuTorch-compatible LLM program, streaming it to stdout, with a stats line on stderr
//! (or one JSON object on stdout with `--json`).

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rbuild_llm_runner::generate::{self, GenConfig, Model, Stats};
use rbuild_llm_runner::{chat, kernels, program as llm_program};
use rbuild_runner_support::text::sampling::Sampler;
use rbuild_runner_support::text::stream::TextStream;
use rbuild_runner_support::text::tokenizer;
use rbuild_runner_support::cli::{self, emit};
use rbuild_runner_support::{in_file, program, Failure, Outcome};

#[derive(Parser)]
#[command(name = "llama_runner", about = "Generate text with an ExecuTorch-compatible LLM program")]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Hugging Face tokenizer.json, Mistral tekken.json or a tiktoken rank file (detected by content).
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

fn main() -> std::process::ExitCode {
    cli::main(std::env::args_os(), run)
}

fn check_args(a: &Args) -> Outcome {
    if !(a.temperature.is_finite() && a.temperature >= 0.0) {
        return Err(Failure(format!("--temperature must be a number ≥ 0, got {}", a.temperature)));
    }
    if !(a.top_p > 0.0 && a.top_p <= 1.0) {
        return Err(Failure(format!("--top-p must be in (0, 1], got {}", a.top_p)));
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
    let tok_path = a.tokenizer.clone().ok_or_else(|| Failure("--tokenizer is required".into()))?;
    let prompt_text = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => in_file(std::fs::read_to_string(f), f)?,
        (None, None) => return Err(Failure("--prompt or --prompt-file is required".into())),
    };

    let t_load = Instant::now();
    let file = program::open(a.model.as_deref(), !a.no_mmap, rbuild_runner_support::embedded_program!())?;
    let prog = file.load()?;
    let model_name = file.name();
    let registry = kernels::registry();
    let (mut model, meta) = in_file(llm_program::load_model(&prog, &registry, a.threads), model_name)?;
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
    in_file(generate::check_budget(prompt.len(), max_new, max_context), model_name)?;
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
        in_file(generate::generate(&mut model as &mut dyn Model, &prompt, &mut s, &cfg, &mut |_| Ok(())), model_name)?;
    }
    let stdout = std::io::stdout();
    // On a terminal, control characters a model emits are shown, not acted on.
    let terminal = std::io::IsTerminal::is_terminal(&stdout);
    let shown = |s: &str| if terminal { rbuild_runner_support::text::printable::printable(s).into_owned() } else { s.to_string() };
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
                emit(&mut out, &shown(&piece))?;
            }
            text_out.push_str(&piece);
        }
        Ok(())
    };
    let gen = in_file(generate::generate(&mut model as &mut dyn Model, &prompt, &mut sampler, &cfg, &mut on_token), model_name)?;
    let rest = stream.finish(tok_ref).map_err(|e| Failure(format!("{}: {}", tok_path.display(), e.0)))?;
    text_out.push_str(&rest);
    let stats = Stats::new(load_time, prompt.len(), &gen, rbuild_runner_support::stats::peak_rss_bytes());
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
        emit(&mut out, &format!("{}\n", shown(&rest)))?;
        eprintln!("{}", stats.line());
    }
    Ok(())
}
