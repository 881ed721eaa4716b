//! Perplexity of an LLM program over a text: the program run as the `llm` runner runs it
//! (`rbuild_llm_runner::program::ProgramModel`), every scored position's logits gathered in the
//! cheapest way the program allows, and [`crate::perplexity`]'s definition applied.

use rbuild_llm_runner::generate::Model;
use rbuild_llm_runner::program::{read_metadata, LogitRows, ProgramModel};
use rbuild_runner_support::text::Tokenizer;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelRegistry, Program};

use crate::perplexity::{nll, ChunkPlan, NllSum};

/// The longest default chunk (llama-perplexity's default context).
pub const DEFAULT_MAX_CTX: usize = 512;

/// How the logits of every position of a chunk were obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsPath {
    /// The program returns a row per input token (`full-logits`, or a full-sequence program):
    /// one call per chunk (per piece the program takes, with a KV cache).
    AllRows,
    /// The program returns the last token's row only and keeps a KV cache: the context half
    /// is prefilled, then one token per call.
    TokenByToken,
    /// The last token's row only and no KV cache: one call per prefix (slow, but correct).
    PerPrefix,
}

impl LogitsPath {
    pub fn as_str(self) -> &'static str {
        match self {
            LogitsPath::AllRows => "all-rows",
            LogitsPath::TokenByToken => "token-by-token",
            LogitsPath::PerPrefix => "per-prefix",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            LogitsPath::AllRows => "every position's logits from one call per chunk",
            LogitsPath::TokenByToken => "last-position logits: the context half prefilled, then one token per call (KV cache)",
            LogitsPath::PerPrefix => "last-position logits: one call per prefix (no KV cache)",
        }
    }
}

/// What a perplexity run measured and how.
#[derive(Clone, Debug, PartialEq)]
pub struct PerplexityReport {
    pub perplexity: f64,
    /// Tokens of the whole text (the BOS included).
    pub tokens: usize,
    pub plan: ChunkPlan,
    pub scored: usize,
    pub bos: Option<u32>,
    pub path: LogitsPath,
}

/// The BOS id the tokenizer puts before a plain text, if any (llama.cpp's `add_bos`).
pub fn added_bos(tok: &dyn Tokenizer) -> Result<Option<u32>, String> {
    let plain = tok.encode("a", false).map_err(|e| e.0)?;
    let with = tok.encode("a", true).map_err(|e| e.0)?;
    Ok((with.len() > plain.len() && with[1..].starts_with(&plain)).then(|| with[0]))
}

/// The text's tokens as llama-perplexity has them: BOS (when the tokenizer adds one), then the
/// text without special tokens around it (an end-of-text token would be scored otherwise).
pub fn tokenize(tok: &dyn Tokenizer, text: &str) -> Result<(Vec<u32>, Option<u32>), String> {
    let bos = added_bos(tok)?;
    let mut tokens: Vec<u32> = bos.into_iter().collect();
    tokens.extend(tok.encode(text, false).map_err(|e| e.0)?);
    Ok((tokens, bos))
}

/// Perplexity of `program`'s `forward` over `text`, in chunks of `ctx` tokens (default: the
/// program's context, at most [`DEFAULT_MAX_CTX`]).
pub fn perplexity(
    program: &Program<'_>,
    kernels: &KernelRegistry,
    backends: &BackendRegistry,
    tok: &dyn Tokenizer,
    text: &str,
    ctx: Option<usize>,
    threads: usize,
) -> Result<PerplexityReport, String> {
    let meta = read_metadata(program, kernels)?;
    if !program.method_names().contains(&"forward") {
        return Err(format!("the program has no `forward` method (it has: {}); perplexity needs a language model", program.method_names().join(", ")));
    }
    let method = program.load_method("forward", kernels, backends).map_err(|e| e.to_string())?;
    let mut model = ProgramModel::new(method, &meta, threads).map_err(|e| format!("not a language model program: {e}"))?;
    // The longest chunk one context holds: the KV cache, or what one call takes without one.
    let context = match (model.uses_kv_cache(), meta.max_context_len.or(meta.max_seq_len)) {
        (true, Some(n)) => n,
        _ => model.max_tokens_per_call(),
    };
    let n_ctx = match ctx {
        Some(c) if c > context => return Err(format!("a context (--ctx, or the accuracy gate's `ctx`) of {c} tokens is longer than the program's {context}")),
        Some(c) => c,
        None => context.min(DEFAULT_MAX_CTX),
    };
    let (tokens, bos) = tokenize(tok, text)?;
    if let Some(v) = meta.vocab_size {
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= v) {
            return Err(format!("the text has token id {bad}, but the program has a vocabulary of {v}: tokenizer and program do not match"));
        }
    }
    let plan = ChunkPlan::new(tokens.len(), n_ctx)?;
    let mut sum = NllSum::default();
    let mut path = None;
    for c in 0..plan.chunks {
        let input = plan.chunk_input(&tokens, c, bos);
        let used = score_chunk(&mut model, &input, &plan, path, &mut |pos: usize, row: &[f32]| {
            sum.add(nll(row, plan.target(&tokens, c, pos) as usize)?);
            Ok(())
        })
        .map_err(|e| format!("chunk {} of {}: {e}", c + 1, plan.chunks))?;
        path = Some(used);
    }
    Ok(PerplexityReport {
        perplexity: sum.perplexity(),
        tokens: tokens.len(),
        plan,
        scored: sum.count,
        bos,
        path: path.unwrap_or(LogitsPath::AllRows),
    })
}

type RowSink<'a> = &'a mut dyn FnMut(usize, &[f32]) -> Result<(), String>;

/// Evaluates one chunk from an empty context and hands every scored position's logits row to
/// `sink`; returns the path taken (`known`: the one the first chunk found).
fn score_chunk(model: &mut ProgramModel<'_>, chunk: &[u32], plan: &ChunkPlan, known: Option<LogitsPath>, sink: RowSink<'_>) -> Result<LogitsPath, String> {
    let per_call = model.max_tokens_per_call();
    let kv = model.uses_kv_cache();
    if !kv && chunk.len() > per_call {
        return Err(format!("the program keeps no KV cache and takes at most {per_call} tokens per call: use --ctx {per_call} or less"));
    }
    match known {
        // A single-token program returns one row per call whichever way it was exported.
        _ if kv && per_call == 1 => return token_by_token(model, chunk, plan, sink),
        Some(LogitsPath::TokenByToken) => return token_by_token(model, chunk, plan, sink),
        Some(LogitsPath::PerPrefix) => return per_prefix(model, chunk, plan, sink),
        _ => {}
    }
    // All rows: the chunk in pieces of what one call takes (one piece without a KV cache), each
    // at its position. A first piece that comes back with one row means last-row logits only.
    let mut start = 0;
    while start < chunk.len() {
        let end = (start + per_call).min(chunk.len());
        let rows = model.forward_rows(&chunk[start..end], start)?;
        if rows.rows() != end - start {
            if start > 0 || rows.rows() != 1 {
                return Err(format!("the program returned {} logits rows for {} tokens", rows.rows(), end - start));
            }
            return if kv { token_by_token(model, chunk, plan, sink) } else { per_prefix(model, chunk, plan, sink) };
        }
        emit_rows(&rows, start, plan, sink)?;
        start = end;
    }
    Ok(LogitsPath::AllRows)
}

/// Hands the scored rows of a call covering positions `start..` to `sink`.
fn emit_rows(rows: &LogitRows, start: usize, plan: &ChunkPlan, sink: RowSink<'_>) -> Result<(), String> {
    for r in 0..rows.rows() {
        let pos = start + r;
        if plan.scored_positions().contains(&pos) {
            sink(pos, rows.row(r))?;
        }
    }
    Ok(())
}

/// KV-cache program with last-row logits: prefill the unscored context (in calls of what the
/// program takes), then feed each scored position's token alone and read its row. Running from
/// position 0 overwrites every cache entry a later position reads.
fn token_by_token(model: &mut ProgramModel<'_>, chunk: &[u32], plan: &ChunkPlan, sink: RowSink<'_>) -> Result<LogitsPath, String> {
    let per_call = model.max_tokens_per_call();
    let first = plan.first_scored();
    let mut start = 0;
    while start < first {
        let end = (start + per_call).min(first);
        model.forward_rows(&chunk[start..end], start)?;
        start = end;
    }
    for pos in plan.scored_positions() {
        let rows = model.forward_rows(&chunk[pos..=pos], pos)?;
        sink(pos, rows.row(rows.rows() - 1))?;
    }
    Ok(LogitsPath::TokenByToken)
}

/// No KV cache and last-row logits: the logits at position `i` are the last row of a call on
/// the first `i + 1` tokens.
fn per_prefix(model: &mut ProgramModel<'_>, chunk: &[u32], plan: &ChunkPlan, sink: RowSink<'_>) -> Result<LogitsPath, String> {
    for pos in plan.scored_positions() {
        let rows = model.forward_rows(&chunk[..=pos], 0)?;
        sink(pos, rows.row(rows.rows() - 1))?;
    }
    Ok(LogitsPath::PerPrefix)
}
