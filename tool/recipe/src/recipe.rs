//! Recipes (`recipes/<name>.kdl`): which model to export, for which backend, with which runner,
//! for which platforms. Decoded by hand from KDL so every mistake gets a labelled diagnostic.

use std::fmt;
use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlNode};
use miette::{Report, SourceSpan};

use crate::choice::Choice;
use crate::decode::{Decoder, Parent, Spanned};
use crate::diag::{syntax_problems, LoadError, Problem, Source};
use crate::suggest;

/// A loaded, validated recipe.
#[derive(Clone, Debug)]
pub struct Recipe {
    /// The file stem: `recipes/mobilenet-cpu.kdl` is `mobilenet-cpu`.
    pub name: String,
    pub description: String,
    pub model: ModelSpec,
    pub backend: BackendSpec,
    pub runner: RunnerSpec,
    /// Platform names (`toolchains/<name>.kdl`), in the order given, without repeats.
    pub platforms: Vec<String>,
    /// The file's text, named as it was loaded, for diagnostics that later steps raise about
    /// the recipe (see [`Recipe::problem`]).
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// A model definition name (rbuild-models' registry), e.g. `mobilenet_v2`.
    pub arch: String,
    pub weights: WeightsSource,
    pub input_shape: Vec<usize>,
    pub dtype: Dtype,
    pub quantize: Quantize,
    /// The `model` node's name in the recipe.
    pub span: SourceSpan,
}

/// Where the model's parameters come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightsSource {
    /// A safetensors state dict; relative paths in a recipe are resolved against its folder.
    File(PathBuf),
    /// Seeded random weights: a demo that runs without a download (its outputs mean nothing).
    Random(u64),
}

impl fmt::Display for WeightsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightsSource::File(path) => write!(f, "{}", path.display()),
            WeightsSource::Random(seed) => write!(f, "random weights (seed {seed}, demo only)"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Float32,
    Float16,
    BFloat16,
}

impl Choice for Dtype {
    const WHAT: &'static str = "dtype";
    const ALL: &'static [(&'static str, Self)] =
        &[("float32", Dtype::Float32), ("float16", Dtype::Float16), ("bfloat16", Dtype::BFloat16)];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantize {
    None,
    Int8,
}

impl Choice for Quantize {
    const WHAT: &'static str = "quantization";
    const ALL: &'static [(&'static str, Self)] = &[("none", Quantize::None), ("int8", Quantize::Int8)];
}

#[derive(Clone, Debug, PartialEq)]
pub struct BackendSpec {
    pub kind: Backend,
    pub fallback: Fallback,
    /// The `backend` node's name in the recipe.
    pub span: SourceSpan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Cpu,
    Cuda,
    Metal,
    EthosU,
}

impl Choice for Backend {
    const WHAT: &'static str = "backend";
    const ALL: &'static [(&'static str, Self)] =
        &[("cpu", Backend::Cpu), ("cuda", Backend::Cuda), ("metal", Backend::Metal), ("ethos-u", Backend::EthosU)];
}

impl Backend {
    /// The name recipes use (`ethos-u`).
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// Whether operators a delegate cannot take may run on the CPU kernels instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    Allow,
    Deny,
}

impl Choice for Fallback {
    const WHAT: &'static str = "fallback";
    const ALL: &'static [(&'static str, Self)] = &[("allow", Fallback::Allow), ("deny", Fallback::Deny)];
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunnerSpec {
    /// A runner template name (`templates/`), e.g. `image-classifier`.
    pub template: String,
    /// Compile the program into the runner binary instead of loading a `.pte` file.
    pub embed_program: bool,
    /// How many best classes to print, for classifier runners.
    pub top: Option<u32>,
    /// The `runner` node's name in the recipe.
    pub span: SourceSpan,
}

/// The names a recipe may refer to. The caller fills it (the CLI from rbuild-models, the
/// runner templates and the toolchains folder) so this crate stays free of those dependencies
/// and unknown names get "did you mean" help from the real lists.
#[derive(Clone, Copy, Debug)]
pub struct Catalog<'a> {
    pub models: &'a [&'a str],
    /// Backends this build can target (a recipe naming another one is rejected as unavailable).
    pub backends: &'a [Backend],
    pub runners: &'a [&'a str],
    pub platforms: &'a [&'a str],
}

const TOP: &[&str] = &["description", "model", "backend", "runner", "platforms"];
const MODEL: &[&str] = &["weights", "input-shape", "dtype", "quantize"];
const BACKEND: &[&str] = &["fallback"];
const RUNNER: &[&str] = &["embed-program", "top"];

impl Recipe {
    /// Reads, parses and validates the recipe at `path`. Every problem in the file comes back
    /// in one report; render it with [`crate::render`].
    pub fn load(path: impl AsRef<Path>, catalog: &Catalog) -> Result<Recipe, Report> {
        let path = path.as_ref();
        match std::fs::read_to_string(path) {
            Ok(text) => Recipe::from_source(path, text, catalog),
            Err(e) => Err(LoadError::report(
                &format!("cannot load recipe `{}`", path.display()),
                vec![Problem::plain(format!("cannot read `{}`: {e}", path.display()))
                    .help("recipes live in `recipes/<name>.kdl`; `rbuild list` shows them")],
            )),
        }
    }

    /// Parses and validates recipe `text` as if read from `path`: the path names the recipe
    /// (its stem), labels diagnostics, and anchors relative weights paths (its folder).
    pub fn from_source(path: impl AsRef<Path>, text: impl Into<String>, catalog: &Catalog) -> Result<Recipe, Report> {
        let path = path.as_ref();
        let source = Source::new(path.display().to_string(), text);
        let what = format!("cannot load recipe `{}`", path.display());
        let doc: KdlDocument = source
            .text()
            .parse()
            .map_err(|e| LoadError::report(&what, syntax_problems(&source, e)))?;
        let mut d = Decoder::new(&source);
        let base = path.parent().unwrap_or(Path::new(""));
        let parts = decode(&mut d, &doc, base, catalog);
        LoadError::check(&what, d.problems)?;
        let (description, model, backend, runner, platforms) =
            parts.ok_or_else(|| LoadError::report(&what, vec![Problem::plain("the recipe could not be decoded")]))?;
        let name = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        Ok(Recipe { name, description, model, backend, runner, platforms, source })
    }

    /// The path of recipe `name` in `dir` (`recipes/<name>.kdl`), or a report with the closest
    /// known name, for `rbuild <name>`.
    pub fn find(dir: impl AsRef<Path>, name: &str) -> Result<PathBuf, Report> {
        let dir = dir.as_ref();
        let path = dir.join(format!("{name}.kdl"));
        if path.is_file() {
            return Ok(path);
        }
        let names = recipe_names(dir).unwrap_or_default();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let help = suggest::help(name, &names, &format!("recipes in `{}`", dir.display()));
        Err(LoadError::report(&format!("unknown recipe `{name}`"), vec![Problem::plain(format!("there is no `{}`", path.display())).help(help)]))
    }

    /// A problem about `span` of this recipe, for later steps (e.g. the planner labelling the
    /// `backend` node when an operator has no kernel). Wrap it with [`LoadError::report`].
    pub fn problem(&self, span: SourceSpan, message: impl Into<String>, label: impl Into<String>) -> Problem {
        self.source.problem(span, message, label)
    }
}

/// The recipes in `dir`: the stems of its `.kdl` files, sorted.
pub fn recipe_names(dir: impl AsRef<Path>) -> std::io::Result<Vec<String>> {
    let files = crate::toolchain::kdl_files(dir.as_ref())?;
    Ok(files.iter().filter_map(|f| f.file_stem()).map(|s| s.to_string_lossy().into_owned()).collect())
}

type Parts = (String, ModelSpec, BackendSpec, RunnerSpec, Vec<String>);

fn decode(d: &mut Decoder, doc: &KdlDocument, base: &Path, catalog: &Catalog) -> Option<Parts> {
    let minimal = "`model \"mobilenet_v2\" { weights \"random:1\"; input-shape 1 3 224 224 }; backend \"cpu\"; runner \"image-classifier\"; platforms \"host\"`";
    if !d.not_empty(doc, "recipe", minimal) {
        return None;
    }
    let top = d.fields(Parent::File("recipe"), Some(doc), TOP, &[]);
    let description = match top.get("description") {
        Some(node) => d.string(node).map(|s| s.value),
        None => Some(String::new()),
    };
    let model = d
        .require(&top, Parent::File("recipe"), "model", "`model \"mobilenet_v2\" { weights \"random:1\"; input-shape 1 3 224 224 }`")
        .and_then(|node| model(d, node, base, catalog));
    let backend = d
        .require(&top, Parent::File("recipe"), "backend", "`backend \"cpu\"`")
        .and_then(|node| backend(d, node, catalog));
    let runner = d
        .require(&top, Parent::File("recipe"), "runner", "`runner \"image-classifier\"`")
        .and_then(|node| runner(d, node, catalog));
    let platforms = d
        .require(&top, Parent::File("recipe"), "platforms", "`platforms \"host\"`")
        .and_then(|node| platforms(d, node, catalog));
    Some((description?, model?, backend?, runner?, platforms?))
}

fn model(d: &mut Decoder, node: &KdlNode, base: &Path, catalog: &Catalog) -> Option<ModelSpec> {
    let arch = d.block_name(node, MODEL).and_then(|arch| known(d, arch, catalog.models, "model"));
    let fields = d.fields(Parent::Node(node), node.children(), MODEL, &[]);
    let weights = d
        .require(&fields, Parent::Node(node), "weights", "`weights \"random:1\"` or `weights \"model.safetensors\"`")
        .and_then(|n| d.string(n))
        .and_then(|w| match resolve_weights(&w.value, base) {
            Ok(weights) => Some(weights),
            Err(e) => {
                d.report(e.problem(d.source, w.span, "the recipe's folder"));
                None
            }
        });
    let input_shape = d
        .require(&fields, Parent::Node(node), "input-shape", "`input-shape 1 3 224 224`")
        .and_then(|n| d.ints(n, 1, i128::from(u32::MAX)))
        .map(|dims| dims.iter().map(|dim| dim.value as usize).collect());
    let dtype = match fields.get("dtype") {
        Some(n) => d.string(n).and_then(|s| d.choice(&s)),
        None => Some(Dtype::Float32),
    };
    let quantize = match fields.get("quantize") {
        Some(n) => d.string(n).and_then(|s| d.choice(&s)),
        None => Some(Quantize::None),
    };
    Some(ModelSpec { arch: arch?, weights: weights?, input_shape: input_shape?, dtype: dtype?, quantize: quantize?, span: node.name().span() })
}

fn backend(d: &mut Decoder, node: &KdlNode, catalog: &Catalog) -> Option<BackendSpec> {
    let kind = d.block_name(node, BACKEND).and_then(|name| {
        let kind: Backend = d.choice(&name)?;
        if catalog.backends.contains(&kind) {
            return Some(kind);
        }
        let available: Vec<&str> = catalog.backends.iter().map(|b| b.as_str()).collect();
        d.error(
            name.span,
            format!("backend `{}` is not available in this build", name.value),
            "not available",
            suggest::help(&name.value, &available, "available backends"),
        );
        None
    });
    let fields = d.fields(Parent::Node(node), node.children(), BACKEND, &[]);
    let fallback = match fields.get("fallback") {
        Some(n) => d.string(n).and_then(|s| d.choice(&s)),
        None => Some(Fallback::Allow),
    };
    Some(BackendSpec { kind: kind?, fallback: fallback?, span: node.name().span() })
}

fn runner(d: &mut Decoder, node: &KdlNode, catalog: &Catalog) -> Option<RunnerSpec> {
    let template = d.block_name(node, RUNNER).and_then(|t| known(d, t, catalog.runners, "runner"));
    let fields = d.fields(Parent::Node(node), node.children(), RUNNER, &[]);
    let embed_program = match fields.get("embed-program") {
        Some(n) => d.boolean(n),
        None => Some(false),
    };
    let top = match fields.get("top") {
        Some(n) => d.int(n, 1, i128::from(u32::MAX)).map(|t| Some(t.value as u32)),
        None => Some(None),
    };
    Some(RunnerSpec { template: template?, embed_program: embed_program?, top: top?, span: node.name().span() })
}

fn platforms(d: &mut Decoder, node: &KdlNode, catalog: &Catalog) -> Option<Vec<String>> {
    let names = d.strings(node)?;
    let mut platforms: Vec<String> = Vec::new();
    let mut ok = true;
    for (i, name) in names.iter().enumerate() {
        if let Some(first) = names[..i].iter().find(|n| n.value == name.value) {
            let problem = d
                .source
                .problem(name.span, format!("platform `{}` is listed twice", name.value), "listed again here")
                .also(first.span, "first listed here")
                .help("list each platform once");
            d.report(problem);
            ok = false;
        } else if let Some(name) = known(d, name.clone(), catalog.platforms, "platform") {
            platforms.push(name);
        } else {
            ok = false;
        }
    }
    ok.then_some(platforms)
}

/// `value` when it names one of `names`, else a problem with a suggestion.
fn known(d: &mut Decoder, value: Spanned<String>, names: &[&str], what: &str) -> Option<String> {
    if names.contains(&value.value.as_str()) {
        return Some(value.value);
    }
    let help = suggest::help(&value.value, names, &format!("known {what}s"));
    d.error(value.span, format!("unknown {what} `{}`", value.value), format!("not a known {what}"), help);
    None
}

/// Why a weights setting was rejected.
#[derive(Debug)]
pub(crate) enum WeightsError {
    BadSeed,
    NoHome,
    Missing(PathBuf),
    NotAFile(PathBuf),
}

impl WeightsError {
    /// The problem for a weights value at `span`; relative paths were resolved against `base`.
    pub(crate) fn problem(&self, source: &Source, span: SourceSpan, base: &str) -> Problem {
        let forms = format!("give a safetensors path (absolute, ~/…, or relative to {base}) or `random:SEED`");
        match self {
            WeightsError::BadSeed => source
                .problem(span, "random weights need an integer seed", "not `random:SEED`")
                .help("write e.g. `random:1` (a seed from 0 to 18446744073709551615)"),
            WeightsError::NoHome => source
                .problem(span, "cannot expand `~`: HOME is not set", "starts with ~")
                .help("write the full path"),
            WeightsError::Missing(path) => source
                .problem(span, format!("weights file `{}` does not exist", path.display()), "no such file")
                .help(forms),
            WeightsError::NotAFile(path) => source
                .problem(span, format!("weights path `{}` is not a file", path.display()), "not a file")
                .help(forms),
        }
    }
}

/// Reads a weights setting: `random:SEED`, or a path (`~` expanded, relative to `base`) that
/// must name an existing file.
pub(crate) fn resolve_weights(text: &str, base: &Path) -> Result<WeightsSource, WeightsError> {
    if let Some(seed) = text.strip_prefix("random:") {
        return seed.trim().parse().map(WeightsSource::Random).map_err(|_| WeightsError::BadSeed);
    }
    let path = expand_home(text)?;
    let path = if path.is_absolute() { path } else { base.join(path) };
    if path.is_file() {
        Ok(WeightsSource::File(path))
    } else if path.exists() {
        Err(WeightsError::NotAFile(path))
    } else {
        Err(WeightsError::Missing(path))
    }
}

/// `~` and `~/…` become paths under $HOME; anything else is taken as written.
fn expand_home(text: &str) -> Result<PathBuf, WeightsError> {
    let rest = match text.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return Ok(PathBuf::from(text)),
    };
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or(WeightsError::NoHome)?;
    Ok(PathBuf::from(home).join(rest))
}
