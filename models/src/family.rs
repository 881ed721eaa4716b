//! One interface for sequence-model families (Llama, Whisper, …): a family reads its checkpoint
//! (or builds its demo), declares the program's methods and getters, and builds each method's
//! graph. [`export`] turns that into a `.pte`: weight quantization, passes, a memory plan per
//! method, one program. The CLI and the recipe build step call only this module, so a new
//! family is a module in `models/` plus one entry in [`FAMILIES`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rbuild_export::emit::{self, Getter, MethodSpec};
use rbuild_export::error::Result;
use rbuild_export::passes::prequantized::{self, PreQuantized};
use rbuild_export::passes::quantize::{self, EmbeddingQuant, LinearQuant};
use rbuild_export::passes::{self, Options};
use rbuild_export::graph::Arg;
use rbuild_export::{plan, ExportError, Graph};

pub use crate::fit::{Fitted, Lowered, SizeRequest};

/// Where the weights come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A Hugging Face checkpoint folder (`config.json`, `*.safetensors`, …).
    Checkpoint(PathBuf),
    /// The family's built-in demo: a tiny model with seeded random weights.
    Demo { seed: u64 },
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Checkpoint(p) => p.display().to_string(),
            Source::Demo { .. } => "demo".into(),
        }
    }
}

/// Export settings every family understands (each uses the ones that apply to it). Sizes are
/// [`SizeRequest`]s: exact values the model must hold, or defaults fitted to it
/// ([`Family::fit`]); None is the family's own default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportOptions {
    /// Longest token sequence (LLM: prompt + generation; speech decoders: their cache length,
    /// by default the model's own limit).
    pub max_seq_len: Option<SizeRequest<usize>>,
    /// Logits for every position of a call, not just the last.
    pub full_logits: bool,
    /// Core ATen only: no KV cache, no custom ops, static shapes (ExecuTorch runs it as is).
    pub core_aten: bool,
    /// Speech: the longest audio the preprocessor method accepts, in seconds.
    pub max_audio_seconds: Option<SizeRequest<f64>>,
    /// Only these methods (getters are always kept); None = all. A one-method selection may
    /// be renamed `forward` with [`ExportOptions::as_forward`] (ExecuTorch's separate
    /// preprocessor program).
    pub only_methods: Option<Vec<String>>,
    pub as_forward: bool,
    pub linear: Option<LinearQuant>,
    pub embedding: Option<EmbeddingQuant>,
}

impl ExportOptions {
    /// These options with `fitted`'s sizes as exact requests: exporting them fits nothing
    /// again (the build fits once, when it plans, and records the sizes it will get).
    pub fn with_sizes(&self, fitted: &Fitted) -> ExportOptions {
        ExportOptions {
            max_seq_len: Some(SizeRequest::Exactly(fitted.max_seq_len)),
            max_audio_seconds: fitted.max_audio_seconds.map(SizeRequest::Exactly),
            ..self.clone()
        }
    }
}

/// One method of the program, as a functional graph.
pub struct MethodGraph {
    pub name: String,
    pub graph: Graph,
}

/// What a family builds: its methods, getters, and words for the report.
pub struct FamilyProgram {
    pub methods: Vec<MethodGraph>,
    pub getters: Vec<Getter>,
    /// e.g. "llama (4 layers, dim 128, vocab 259)".
    pub description: String,
    pub notes: Vec<String>,
    /// Linear weights that arrived quantized in a format rbuild keeps (GGUF blocks), by name:
    /// kept as they are when the export quantizes linears.
    pub prequantized: Arc<HashMap<String, PreQuantized>>,
}

/// A model family.
pub trait Family: Sync {
    /// The name `--model` and recipes use (`llama`, `whisper`).
    fn name(&self) -> &'static str;
    /// One line for `rbuild export --list`.
    fn summary(&self) -> &'static str;
    /// The sizes an export of `source` with `o` gets: defaults lowered to what the model
    /// holds (each change in [`Fitted::lowered`]), exact values checked against it. Reads only
    /// the model's config, so a build can plan (and key its cache) on the sizes it will get.
    fn fit(&self, source: &Source, o: &ExportOptions) -> Result<Fitted>;
    /// Reads the checkpoint (or makes the demo) and builds every method, with sizes fitted
    /// as [`Family::fit`] does (a lowered default becomes a note).
    fn build(&self, source: &Source, o: &ExportOptions) -> Result<FamilyProgram>;
    /// The demo model's tokenizer (the text of a file named as [`Family::tokenizer_files`]'s
    /// first), when the family has a demo that
    /// prints text.
    fn demo_tokenizer_json(&self) -> Option<String> {
        None
    }
    /// The demo tokenizer's `tokenizer_config.json` (a chat template, so `--chat` works on the
    /// demo too), when the family's runner has a chat mode.
    fn demo_tokenizer_config_json(&self) -> Option<String> {
        None
    }
    /// The tokenizer files a checkpoint folder may hold, preferred first (the demo's tokenizer
    /// is written under the first name).
    fn tokenizer_files(&self) -> &'static [&'static str] {
        &["tokenizer.json"]
    }
    /// Whether the program's input is audio (PCM) rather than token ids.
    fn takes_audio(&self) -> bool {
        false
    }
    /// Whether the runner needs a tokenizer (a speech runner without one prints token ids).
    fn tokenizer_required(&self) -> bool {
        true
    }
    /// Files the runner's output folder gets beside the program (name, bytes): e.g. a demo
    /// input.
    fn runner_files(&self) -> Vec<(&'static str, Vec<u8>)> {
        Vec::new()
    }
}

/// The registered families.
pub static FAMILIES: &[&dyn Family] = &[&crate::llama::family::Llama, &crate::voxtral::family::Voxtral, &crate::whisper::family::Whisper];

/// The family called `name`.
pub fn family(name: &str) -> Option<&'static dyn Family> {
    FAMILIES.iter().copied().find(|f| f.name() == name)
}

/// Names of the registered families.
pub fn names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name()).collect()
}

/// What the export did, for the report.
pub struct ExportReport {
    pub description: String,
    /// Operator counts over all methods.
    pub ops: BTreeMap<String, usize>,
    /// Planned arena bytes per method, in program order.
    pub arenas: Vec<(String, usize)>,
    pub constant_bytes: usize,
    pub program_bytes: usize,
    pub notes: Vec<String>,
    pub millis: f64,
}

/// Builds, quantizes, optimizes, plans and emits the family's program.
pub fn export(family: &dyn Family, source: &Source, o: &ExportOptions) -> Result<(Vec<u8>, ExportReport)> {
    export_with(family, source, o, &mut |_, _| Ok(()))
}

/// Hands each method's optimized functional graph to a backend before the out-variant
/// conversion (the GPU partitioner replaces subgraphs with delegate calls there).
pub type DelegateHook<'a> = dyn FnMut(&str, &mut Graph) -> Result<()> + 'a;

/// [`export`], with `delegate` called on every method between the graph passes and planning.
pub fn export_with(family: &dyn Family, source: &Source, o: &ExportOptions, delegate: &mut DelegateHook<'_>) -> Result<(Vec<u8>, ExportReport)> {
    let t0 = Instant::now();
    if o.core_aten && (o.linear.is_some() || o.embedding.is_some()) {
        return Err(ExportError::Invalid("the Core-ATen-only export is float32 (drop quantization)".into()));
    }
    let built = family.build(source, o)?;
    let mut methods = built.methods;
    if let Some(only) = &o.only_methods {
        let known: Vec<String> = methods.iter().map(|m| m.name.clone()).collect();
        if let Some(bad) = only.iter().find(|n| !known.contains(n)) {
            return Err(ExportError::Invalid(format!("{} has no method '{bad}' (methods: {})", family.name(), known.join(", "))));
        }
        methods.retain(|m| only.contains(&m.name));
    }
    if o.as_forward {
        match methods.as_mut_slice() {
            [one] => one.name = "forward".into(),
            _ => return Err(ExportError::Invalid("only a single method can be written as `forward`".into())),
        }
    }
    let mut description = built.description;
    let mut notes = built.notes;
    // What the file's own blocks became, for the description (`… layers` counts rbuild's).
    let mut kept_blocks = None;
    if o.linear.is_some() && !built.prequantized.is_empty() {
        let mut kept = BTreeMap::<&'static str, usize>::new();
        for m in &mut methods {
            for n in &m.graph.nodes {
                if n.op == "aten::linear" {
                    if let Some(Arg::Tensor(v)) = n.args.get(1) {
                        let Some(w) = built.prequantized.get(&m.graph.values[*v].name) else { continue };
                        *kept.entry(w.op()).or_default() += 1;
                    }
                }
            }
            prequantized::use_prequantized_linears(&mut m.graph, &built.prequantized)?;
            let r = prequantized::use_prequantized_embeddings(&mut m.graph, &built.prequantized)?;
            if r.quantized > 0 {
                *kept.entry("quantized_decomposed::embedding_byte").or_default() += r.quantized;
            }
            notes.extend(r.skipped);
        }
        let list: Vec<String> = kept.iter().map(|(op, n)| format!("{n} × {op}")).collect();
        notes.push(format!("kept the file's quantization: {}", list.join(", ")));
        kept_blocks = Some(list.join(", "));
    }
    if let Some(mode) = o.linear {
        let mut quantized = 0;
        for m in &mut methods {
            let r = quantize::quantize_linears(&mut m.graph, mode)?;
            quantized += r.quantized;
            notes.extend(r.skipped.iter().map(|s| format!("kept float32: {s}")));
        }
        description += &match (quantized, &kept_blocks) {
            (0, Some(kept)) => format!(", the file's blocks kept ({kept})"),
            (_, Some(kept)) => format!(", linears {} ({quantized} layers), the file's blocks kept ({kept})", mode.name()),
            (_, None) => format!(", linears {} ({quantized} layers)", mode.name()),
        };
    }
    if let Some(mode) = o.embedding {
        for m in &mut methods {
            let r = quantize::quantize_embeddings(&mut m.graph, mode)?;
            notes.extend(r.skipped.iter().map(|s| format!("kept float32: {s}")));
        }
        description += &format!(", embedding {}", match mode {
            EmbeddingQuant::Int8 => "int8".to_string(),
            EmbeddingQuant::Int4 { group } => format!("int4-g{group}"),
        });
    }
    let options = Options { decompose_linear: o.core_aten, ..Default::default() };
    let mut plans = Vec::new();
    for m in &mut methods {
        passes::optimize_functional(&mut m.graph, &options)?;
        delegate(&m.name, &mut m.graph)?;
        passes::to_out::to_out_variants(&mut m.graph)?;
        plans.push(plan::plan_memory(&m.graph));
    }
    let specs: Vec<MethodSpec<'_>> =
        methods.iter().zip(&plans).map(|(m, p)| MethodSpec { name: &m.name, graph: &m.graph, plan: p }).collect();
    let bytes = emit::emit_program(&specs, &built.getters)?;
    let mut ops = BTreeMap::new();
    for m in &methods {
        for n in &m.graph.nodes {
            *ops.entry(n.op.clone()).or_default() += 1;
        }
    }
    let report = ExportReport {
        description,
        ops,
        arenas: methods.iter().zip(&plans).map(|(m, p)| (m.name.clone(), p.arena_bytes)).collect(),
        constant_bytes: methods.iter().map(|m| m.graph.constant_bytes()).sum(),
        program_bytes: bytes.len(),
        notes,
        millis: t0.elapsed().as_secs_f64() * 1e3,
    };
    Ok((bytes, report))
}

impl ExportReport {
    /// The human-readable report `rbuild export` prints.
    pub fn print(&self, out: &std::path::Path) {
        println!("exported {} → {} ({} bytes)", self.description, out.display(), self.program_bytes);
        for n in &self.notes {
            println!("  note: {n}");
        }
        println!("  operators:");
        for (op, n) in &self.ops {
            println!("    {op:<55} x{n}");
        }
        if let [(_, bytes)] = self.arenas.as_slice() {
            println!("  planned arena (activations + KV cache): {bytes} bytes");
        } else {
            for (m, bytes) in &self.arenas {
                println!("  planned arena of {m}: {bytes} bytes");
            }
        }
        println!("  constants: {} bytes", self.constant_bytes);
        println!("  time: {:.1} ms", self.millis);
    }
}
