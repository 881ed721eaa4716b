//! Recipes (`recipes/<name>.kdl`): which model to export, for which backend, with which runner,
//! for which platforms. Decoded by hand from KDL so every mistake gets a labelled diagnostic.

use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlNode};
use miette::{Report, SourceSpan};

use crate::accuracy::AccuracySpec;
use crate::choice::Choice;
use crate::decode::{Decoder, Fields, Parent, Spanned};
use crate::diag::{syntax_problems, LoadError, Problem, Source};
use crate::llm::{self, LlmSpec, LLM_ONLY};
pub(crate) use crate::rejection::{calibration_needs_int8, keep_float_needs_int8, language_only, no_input_shape, not_for_prebuilt, Rejection};
use crate::paths::{resolve_file, resolve_folder, resolve_path, PathError, PathUse};
use crate::suggest;
use crate::weights::resolve_weights;
pub use crate::weights::{PackageFile, WeightsSource, PYPI};

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
    /// How `rbuild verify` checks the built artifact against the host reference.
    pub verify: VerifySpec,
    /// The file's text, named as it was loaded, for diagnostics that later steps raise about
    /// the recipe (see [`Recipe::problem`]).
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// A model definition name (rbuild-models' registry), e.g. `mobilenet_v2`.
    pub arch: String,
    pub weights: WeightsSource,
    /// The image input's shape; empty for language models (they take token ids).
    pub input_shape: Vec<usize>,
    pub dtype: Dtype,
    pub quantize: Quantize,
    /// Image models with `quantize "int8"`: a folder of images to calibrate activation ranges
    /// on (None: seeded random inputs, announced by the export).
    pub calibration: Option<PathBuf>,
    /// Image models with `quantize "int8"`: layers (weight-name prefixes such as `features.0`)
    /// kept in float32, for models whose sensitivity report shows a few layers dominating the
    /// int8 error. Empty: everything the quantizer handles becomes int8.
    pub keep_float: Vec<String>,
    /// The language-model settings; `Some` exactly when `arch` is a language model.
    pub llm: Option<LlmSpec>,
    /// An imported `torch.export` archive (`model "pt2"`); its path is `weights`' file.
    pub pt2: Option<Pt2Spec>,
    /// A prebuilt ExecuTorch program (`model "pte"`), copied instead of exported; its path is
    /// `weights`' file (see [`ModelSpec::program_file`]).
    pub prebuilt: bool,
    /// The `model` node's name in the recipe.
    pub span: SourceSpan,
}

impl ModelSpec {
    pub fn is_language_model(&self) -> bool {
        self.llm.is_some()
    }

    /// A model imported from a `.pt2` archive rather than built from a definition in rbuild.
    pub fn is_imported(&self) -> bool {
        self.pt2.is_some()
    }

    /// A prebuilt `.pte` program rather than a model rbuild exports.
    pub fn is_prebuilt(&self) -> bool {
        self.prebuilt
    }

    /// The prebuilt program's path (`model "pte" { program … }`); None for other kinds.
    pub fn program_file(&self) -> Option<&Path> {
        match &self.weights {
            WeightsSource::File(path) if self.prebuilt => Some(path),
            _ => None,
        }
    }

    pub(crate) fn kind(&self) -> ModelKind {
        if self.is_language_model() {
            ModelKind::Language
        } else if self.is_prebuilt() {
            ModelKind::Prebuilt
        } else if self.is_imported() {
            ModelKind::Imported
        } else {
            ModelKind::Image
        }
    }
}

/// The model name that imports a `torch.export.save` archive.
pub const PT2_MODEL: &str = "pt2";

/// The model name that takes a prebuilt ExecuTorch program (`.pte`), e.g. one exported by
/// ExecuTorch's Python with the XNNPACK partitioner.
pub const PTE_MODEL: &str = "pte";

/// Settings of an imported `.pt2` model: the archive gives inputs, shapes and dtypes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pt2Spec {
    /// Narrowed upper bounds of dynamic input dims (`dim-max "ids" 1 64`).
    pub dim_max: Vec<DimMax>,
}

/// `dim-max INPUT DIM MAX`: input `INPUT`'s dim `DIM` takes at most `MAX` (the archive's
/// bound, when it has one, must be at least that).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimMax {
    pub input: String,
    pub dim: usize,
    pub max: usize,
}

/// Where the model's parameters come from.
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
    /// float16 weights, float32 arithmetic (language and speech models only).
    Fp16,
    Int8,
    /// 4-bit groupwise weights (language models only).
    Int4,
    /// `8da4w`: int8 dynamic activations with 4-bit groupwise weights (language models only).
    Int8DynInt4,
}

impl Choice for Quantize {
    const WHAT: &'static str = "quantization";
    const ALL: &'static [(&'static str, Self)] = &[
        ("none", Quantize::None),
        ("fp16", Quantize::Fp16),
        ("int8", Quantize::Int8),
        ("int4", Quantize::Int4),
        ("8da4w", Quantize::Int8DynInt4),
    ];
}

#[derive(Clone, Debug, PartialEq)]
pub struct BackendSpec {
    pub kind: Backend,
    pub fallback: Fallback,
    /// `ethos-u`: the NPU configuration Vela compiles for.
    pub npu: Option<NpuOptions>,
    /// `gpu`: the GPU delegate's settings.
    pub gpu: Option<GpuOptions>,
    /// The `backend` node's name in the recipe.
    pub span: SourceSpan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Cpu,
    Cuda,
    Metal,
    EthosU,
    /// rbuild's GPU delegate (`RbuildGpuBackend`): WGSL kernels over wgpu (Metal, Vulkan, DX12).
    Gpu,
    /// A float image model's ops as `XnnpackBackend` delegates (ExecuTorch's XNNPACK payload
    /// format): rbuild's NHWC kernels run them, and so does ExecuTorch's XNNPACK backend.
    Xnnpack,
}

impl Choice for Backend {
    const WHAT: &'static str = "backend";
    const ALL: &'static [(&'static str, Self)] =
        &[("cpu", Backend::Cpu), ("cuda", Backend::Cuda), ("metal", Backend::Metal), ("ethos-u", Backend::EthosU), ("gpu", Backend::Gpu), ("xnnpack", Backend::Xnnpack)];
}

impl Backend {
    /// The name recipes use (`ethos-u`).
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// The graphics API a `gpu` backend targets first. The delegate's WGSL kernels run on all of
/// them through wgpu; a platform without the named API (Linux for `metal`) uses its own
/// (Vulkan), which the build says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuApi {
    Auto,
    Metal,
    Vulkan,
    Dx12,
    /// NVIDIA GPUs through rbuild's CUDA runtime (the runner also carries wgpu and the CPU
    /// reference, picked at run time when there is no NVIDIA driver).
    Cuda,
}

impl Choice for GpuApi {
    const WHAT: &'static str = "GPU API";
    const ALL: &'static [(&'static str, Self)] =
        &[("auto", GpuApi::Auto), ("metal", GpuApi::Metal), ("vulkan", GpuApi::Vulkan), ("dx12", GpuApi::Dx12), ("cuda", GpuApi::Cuda)];
}

impl GpuApi {
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// The `gpu` backend's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    pub api: GpuApi,
    /// How weights are stored: `float32`, or `float16` / `bfloat16` (half the bytes; compute
    /// stays f32).
    pub dtype: Dtype,
}

/// An Arm Ethos-U configuration (Vela's `--accelerator-config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accelerator(pub &'static str);

impl Choice for Accelerator {
    const WHAT: &'static str = "accelerator";
    const ALL: &'static [(&'static str, Self)] = &[
        ("ethos-u55-32", Accelerator("ethos-u55-32")),
        ("ethos-u55-64", Accelerator("ethos-u55-64")),
        ("ethos-u55-128", Accelerator("ethos-u55-128")),
        ("ethos-u55-256", Accelerator("ethos-u55-256")),
        ("ethos-u65-256", Accelerator("ethos-u65-256")),
        ("ethos-u65-512", Accelerator("ethos-u65-512")),
        ("ethos-u85-128", Accelerator("ethos-u85-128")),
        ("ethos-u85-256", Accelerator("ethos-u85-256")),
        ("ethos-u85-512", Accelerator("ethos-u85-512")),
        ("ethos-u85-1024", Accelerator("ethos-u85-1024")),
        ("ethos-u85-2048", Accelerator("ethos-u85-2048")),
    ];
}

impl Accelerator {
    /// MACs per cycle (the FVP's `ethosu.num_macs`).
    pub fn macs(self) -> u32 {
        self.0.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

/// The `ethos-u` backend's NPU settings; system config and memory mode default per accelerator
/// as in ExecuTorch (Vela's `Arm/vela.ini` names).
#[derive(Clone, Debug, PartialEq)]
pub struct NpuOptions {
    pub accelerator: Accelerator,
    pub system_config: Option<String>,
    pub memory_mode: Option<String>,
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

/// The runner a recipe without a `runner` node gets (`templates/tensor_io`): any program, its
/// inputs and outputs as safetensors files. Model kinds without a dedicated runner use it.
pub const GENERIC_RUNNER: &str = "tensor-io";

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

/// The recipe's `verify { … }` block: the input `rbuild verify` feeds the built artifact and
/// how close its outputs must be to the host reference (numpy's `allclose`:
/// `|got - want| <= atol + rtol * |want|`). Unset tolerances take [`VerifySpec::tolerance`]'s
/// defaults for the model's dtype and quantization.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifySpec {
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    pub input: VerifyInput,
    /// The accuracy gate the build checks (`accuracy { … }`), if any.
    pub accuracy: Option<AccuracySpec>,
}

/// What `rbuild verify` feeds the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyInput {
    /// An image file (PNG/JPEG), preprocessed as the runner does (resize, crop, normalize).
    Image(PathBuf),
    /// Seeded uniform random values in the model's input shape.
    Random(u64),
}

impl Default for VerifySpec {
    fn default() -> Self {
        VerifySpec { atol: None, rtol: None, input: VerifyInput::Random(0), accuracy: None }
    }
}

impl VerifySpec {
    /// (atol, rtol): the recipe's values, else per model: exact for int8 programs (the same
    /// integer arithmetic everywhere), 1e-3 for float32 (kernels differ in summation order
    /// across CPUs), 1e-2 for 16-bit floats.
    pub fn tolerance(&self, model: &ModelSpec) -> (f64, f64) {
        let (atol, rtol) = match (model.quantize, model.dtype) {
            (Quantize::Int8, _) => (0.0, 0.0),
            (_, Dtype::Float32) => (1e-3, 1e-3),
            (_, Dtype::Float16 | Dtype::BFloat16) => (1e-2, 1e-2),
        };
        (self.atol.unwrap_or(atol), self.rtol.unwrap_or(rtol))
    }
}

/// The names a recipe may refer to. The caller fills it (the CLI from rbuild-models, the
/// runner templates and the toolchains folder) so this crate stays free of those dependencies
/// and unknown names get "did you mean" help from the real lists.
#[derive(Clone, Copy, Debug)]
pub struct Catalog<'a> {
    /// Image models (they take `input-shape`).
    pub models: &'a [&'a str],
    /// Language models (they take token ids and `max-seq-len`).
    pub language_models: &'a [&'a str],
    /// Backends this build can target (a recipe naming another one is rejected as unavailable).
    pub backends: &'a [Backend],
    pub runners: &'a [&'a str],
    pub platforms: &'a [&'a str],
}

const TOP: &[&str] = &["description", "model", "backend", "runner", "platforms", "verify"];
const VERIFY: &[&str] = &["atol", "rtol", "input", "seed", "accuracy"];
const MODEL: &[&str] = &[
    "weights",
    "archive",
    "program",
    "dim-max",
    "input-shape",
    "dtype",
    "quantize",
    "calibration",
    "keep-float",
    "max-seq-len",
    "group-size",
    "embedding-quantize",
    "tokenizer",
    "full-logits",
    "max-audio-seconds",
];
/// Fields only an imported (`.pt2`) model takes.
pub(crate) const PT2_ONLY: &[&str] = &["archive", "dim-max"];
/// The fields a prebuilt program (`model "pte"`) takes: everything else was fixed when it was
/// exported.
pub(crate) const PTE_FIELDS: &[&str] = &["program", "quantize"];

const BACKEND: &[&str] = &["fallback", "accelerator", "system-config", "memory-mode", "api", "dtype"];
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
        let (description, model, backend, runner, platforms, verify) =
            parts.ok_or_else(|| LoadError::report(&what, vec![Problem::plain("the recipe could not be decoded")]))?;
        let name = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        Ok(Recipe { name, description, model, backend, runner, platforms, verify, source })
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

type Parts = (String, ModelSpec, BackendSpec, RunnerSpec, Vec<String>, VerifySpec);

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
    let runner = match top.get("runner") {
        Some(node) => runner(d, node, catalog),
        None => generic_runner(d, catalog),
    };
    let platforms = d
        .require(&top, Parent::File("recipe"), "platforms", "`platforms \"host\"`")
        .and_then(|node| platforms(d, node, catalog));
    let verify = match top.get("verify") {
        Some(node) => verify(d, node, base),
        None => Some(VerifySpec::default()),
    };
    // A prebuilt program's delegates (XNNPACK, …) are in it already; rbuild adds none. Checked
    // on the `model` node's name, so a `pte` block with its own mistakes is told this too.
    let prebuilt = top.get("model").and_then(|n| n.entries().first()).and_then(|e| e.value().as_string()) == Some(PTE_MODEL);
    if let (true, Some(b)) = (prebuilt, &backend) {
        if b.kind != Backend::Cpu {
            d.error(
                b.span,
                format!("a prebuilt program (`model \"{PTE_MODEL}\"`) builds with backend `cpu`, not `{}`", b.kind.as_str()),
                "not for `pte`",
                "its delegates (e.g. XnnpackBackend) are in the program already: write `backend \"cpu\"`",
            );
        }
    }
    if let (Some(Some(a)), Some(m), Some(r)) = (verify.as_ref().map(|v| v.accuracy.as_ref()), &model, &runner) {
        crate::accuracy::check_against(d, a, m, r);
    }
    Some((description?, model?, backend?, runner?, platforms?, verify?))
}

fn verify(d: &mut Decoder, node: &KdlNode, base: &Path) -> Option<VerifySpec> {
    for extra in d.args(node, VERIFY) {
        d.error(extra.span(), "`verify` takes no values", "unexpected value", "put its settings in its block: `verify { atol 0.001; rtol 0.001 }`");
    }
    let fields = d.fields(Parent::Node(node), node.children(), VERIFY, &[]);
    let tolerance = |d: &mut Decoder, name: &str| match fields.get(name) {
        Some(n) => d.number(n, 0.0, 1e9).map(|v| Some(v.value)),
        None => Some(None),
    };
    let atol = tolerance(d, "atol");
    let rtol = tolerance(d, "rtol");
    let image = match fields.get("input") {
        Some(n) => d.string(n).and_then(|p| match resolve_file(&p.value, base) {
            Ok(path) => Some(Some((path, n))),
            Err(e) => {
                d.report(e.problem(d.source, p.span, "the recipe's folder", PathUse::VerifyInput));
                None
            }
        }),
        None => Some(None),
    };
    let seed = match fields.get("seed") {
        Some(n) => d.int(n, 0, i128::from(u64::MAX)).map(|s| Some((s.value as u64, n))),
        None => Some(None),
    };
    let input = match (image?, seed?) {
        (Some(_), Some((_, seed_node))) => {
            d.error(seed_node.name().span(), "`seed` and `input` exclude each other", "with `input`", "give an image `input`, or a `seed` for random input, not both");
            None
        }
        (Some((path, _)), None) => Some(VerifyInput::Image(path)),
        (None, Some((seed, _))) => Some(VerifyInput::Random(seed)),
        (None, None) => Some(VerifyInput::Random(0)),
    };
    let accuracy = match fields.get("accuracy") {
        Some(n) => crate::accuracy::accuracy(d, n, base).map(Some),
        None => Some(None),
    };
    Some(VerifySpec { atol: atol?, rtol: rtol?, input: input?, accuracy: accuracy? })
}

fn model(d: &mut Decoder, node: &KdlNode, base: &Path, catalog: &Catalog) -> Option<ModelSpec> {
    let name = d.block_name(node, MODEL);
    let kind = name.as_ref().map_or(ModelKind::Image, |n| ModelKind::of(&n.value, catalog));
    let written = name.as_ref().map_or_else(String::new, |n| n.value.clone());
    let arch = name.and_then(|arch| known(d, arch, &catalog.all_models(), "model"));
    let fields = d.fields(Parent::Node(node), node.children(), MODEL, &["dim-max"]);
    if kind == ModelKind::Prebuilt {
        return prebuilt(d, node, &fields, base, arch);
    }
    if let Some(field) = fields.get("program") {
        d.error(field.name().span(), "`program` is a setting of prebuilt programs", "not for this model", "only `model \"pte\"` takes a `program` (an ExecuTorch `.pte` file)");
    }
    if kind != ModelKind::Imported {
        for field in fields.iter().filter(|n| PT2_ONLY.contains(&n.name().value())) {
            d.error(field.name().span(), format!("`{}` is a setting of imported models", field.name().value()), "not for this model", "only `model \"pt2\"` takes an `archive` and `dim-max`");
        }
    } else if let Some(w) = fields.get("weights") {
        d.error(w.name().span(), "an imported model's weights are in its archive", "not for `pt2`", "give the archive: `archive \"model.pt2\"`");
    }
    let weights_field = if kind == ModelKind::Imported { "archive" } else { "weights" };
    let weights = d
        .require(&fields, Parent::Node(node), weights_field, kind.weights_example())
        .and_then(|n| if kind == ModelKind::Imported { d.string(n).and_then(|w| archive(d, &w, base, kind)) } else { crate::weights::decode(d, n, base, kind) });
    let dtype = match fields.get("dtype") {
        Some(n) => d.string(n).and_then(|s| d.choice(&s)),
        None => Some(Dtype::Float32),
    };
    let quantize = quantize(d, &fields, kind);
    let (input_shape, llm) = match kind {
        ModelKind::Image => {
            for field in fields.iter().filter(|n| LLM_ONLY.contains(&n.name().value())) {
                d.report(language_only(field.name().value(), &written, catalog).at(d.source, field.name().span()));
            }
            let shape = d
                .require(&fields, Parent::Node(node), "input-shape", "`input-shape 1 3 224 224`")
                .and_then(|n| d.ints(n, 1, i128::from(u32::MAX)))
                .map(|dims| dims.iter().map(|dim| dim.value as usize).collect());
            (shape, Some(None))
        }
        ModelKind::Language => {
            if let Some(field) = fields.get("input-shape") {
                d.report(no_input_shape(&written).at(d.source, field.name().span()));
            }
            (Some(Vec::new()), llm::decode(d, node, &fields, base).map(Some))
        }
        ModelKind::Imported => {
            for field in fields.iter().filter(|n| LLM_ONLY.contains(&n.name().value())) {
                d.report(language_only(field.name().value(), &written, catalog).at(d.source, field.name().span()));
            }
            if let Some(field) = fields.get("input-shape") {
                d.error(field.name().span(), "an imported model's input shapes come from its archive", "not for `pt2`", "narrow a dynamic dim with `dim-max \"INPUT\" DIM MAX`");
            }
            (Some(Vec::new()), Some(None))
        }
        // Decoded by prebuilt() above.
        ModelKind::Prebuilt => (Some(Vec::new()), Some(None)),
    };
    let pt2 = if kind == ModelKind::Imported {
        let mut bounds = Vec::new();
        let mut ok = true;
        for n in fields.all("dim-max") {
            match dim_max(d, n) {
                Some(b) => bounds.push(b),
                None => ok = false,
            }
        }
        ok.then_some(Some(Pt2Spec { dim_max: bounds }))
    } else {
        Some(None)
    };
    let calibration = match fields.get("calibration") {
        Some(n) => d.string(n).and_then(|c| {
            let checked = if kind == ModelKind::Language || quantize != Some(Quantize::Int8) {
                Err(calibration_needs_int8(&written))
            } else {
                Ok(())
            };
            let resolved = if kind == ModelKind::Imported { resolve_calibration(&c.value, base) } else { resolve_folder(&c.value, base) };
            match checked {
                Err(r) => {
                    d.report(r.at(d.source, c.span));
                    None
                }
                Ok(()) => match resolved {
                    Ok(path) => Some(Some(path)),
                    Err(e) => {
                        d.report(e.problem(d.source, c.span, "the recipe's folder", PathUse::Calibration));
                        None
                    }
                },
            }
        }),
        None => Some(None),
    };
    let keep_float = match fields.get("keep-float") {
        Some(n) => d.strings(n).and_then(|names| {
            if kind == ModelKind::Language || quantize != Some(Quantize::Int8) {
                d.report(keep_float_needs_int8(&written).at(d.source, n.name().span()));
                return None;
            }
            Some(names.into_iter().map(|s| s.value).collect())
        }),
        None => Some(Vec::new()),
    };
    Some(ModelSpec {
        arch: arch?,
        weights: weights?,
        input_shape: input_shape?,
        dtype: dtype?,
        quantize: quantize?,
        calibration: calibration?,
        keep_float: keep_float?,
        llm: llm?,
        pt2: pt2?,
        prebuilt: false,
        span: node.name().span(),
    })
}

/// The `quantize` field, checked against what the model kind takes.
/// An imported model's `archive` path.
fn archive(d: &mut Decoder, w: &Spanned<String>, base: &Path, kind: ModelKind) -> Option<WeightsSource> {
    match resolve_weights(&w.value, base, kind) {
        Ok(weights) => Some(weights),
        Err(e) => {
            d.report(e.problem(d.source, w.span, "the recipe's folder", kind.path_use()));
            None
        }
    }
}

fn quantize(d: &mut Decoder, fields: &Fields, kind: ModelKind) -> Option<Quantize> {
    match fields.get("quantize") {
        Some(n) => d.string(n).and_then(|s| {
            let q = d.choice(&s)?;
            match kind.check_quantize(q) {
                Ok(()) => Some(q),
                Err(r) => {
                    d.report(r.at(d.source, s.span));
                    None
                }
            }
        }),
        None => Some(Quantize::None),
    }
}

/// `model "pte" { program "model.pte" }`: a program exported elsewhere (ExecuTorch's Python,
/// an XNNPACK partitioner). Its weights, inputs, shapes and quantization are in the file, so
/// every other field is rejected; a missing file is left to the build, so a shipped example
/// loads (and lists) before the user has the program.
fn prebuilt(d: &mut Decoder, node: &KdlNode, fields: &Fields, base: &Path, arch: Option<String>) -> Option<ModelSpec> {
    for field in fields.iter().filter(|n| !PTE_FIELDS.contains(&n.name().value())) {
        d.report(not_for_prebuilt(field.name().value()).at(d.source, field.name().span()));
    }
    let kind = ModelKind::Prebuilt;
    let program = d
        .require(fields, Parent::Node(node), "program", kind.weights_example())
        .and_then(|n| d.string(n))
        .and_then(|p| match resolve_program(&p.value, base) {
            Ok(path) => Some(path),
            Err(e) => {
                d.report(e.problem(d.source, p.span, "the recipe's folder", PathUse::Program));
                None
            }
        });
    let quantize = quantize(d, fields, kind);
    Some(ModelSpec {
        arch: arch?,
        weights: WeightsSource::File(program?),
        input_shape: Vec::new(),
        dtype: Dtype::Float32,
        quantize: quantize?,
        calibration: None,
        keep_float: Vec::new(),
        llm: None,
        pt2: None,
        prebuilt: true,
        span: node.name().span(),
    })
}

/// A prebuilt program's path: `~` expanded, relative to `base`. It must be a file when it
/// exists; whether it exists and is a program is checked by the build.
pub(crate) fn resolve_program(text: &str, base: &Path) -> Result<PathBuf, PathError> {
    let path = resolve_path(text, base)?;
    if path.exists() && !path.is_file() {
        return Err(PathError::NotAFile(path));
    }
    Ok(path)
}

/// `dim-max "INPUT" DIM MAX`.
fn dim_max(d: &mut Decoder, node: &KdlNode) -> Option<DimMax> {
    d.no_children(node);
    let entries: Vec<&kdl::KdlEntry> = node.entries().iter().collect();
    let example = "`dim-max \"input_ids\" 1 64` (input, dim index, largest size)";
    let shape_ok = entries.len() == 3 && entries.iter().all(|e| e.name().is_none());
    let input = entries.first().and_then(|e| e.value().as_string());
    let dim = entries.get(1).and_then(|e| e.value().as_integer()).filter(|v| (0..16).contains(v));
    let max = entries.get(2).and_then(|e| e.value().as_integer()).filter(|v| (1..=i128::from(u32::MAX)).contains(v));
    match (shape_ok, input, dim, max) {
        (true, Some(input), Some(dim), Some(max)) => Some(DimMax { input: input.to_string(), dim: dim as usize, max: max as usize }),
        _ => {
            d.error(node.name().span(), "`dim-max` takes an input name, a dim index (0–15) and a positive maximum", "bad `dim-max`", example);
            None
        }
    }
}

/// An imported model's calibration: a folder of images, or a safetensors file of sample
/// inputs (`input.0`, … with a leading sample dim, or one file per sample in a folder).
pub(crate) fn resolve_calibration(text: &str, base: &Path) -> Result<PathBuf, PathError> {
    let path = resolve_path(text, base)?;
    if path.is_dir() || (path.is_file() && path.extension().is_some_and(|e| e == "safetensors")) {
        Ok(path)
    } else if path.exists() {
        Err(PathError::NotAFolder(path))
    } else {
        Err(PathError::Missing(path))
    }
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
    // NPU settings belong to the ethos-u backend only.
    let npu_fields = ["accelerator", "system-config", "memory-mode"];
    let kind = kind?;
    if kind != Backend::EthosU {
        for f in npu_fields {
            if let Some(n) = fields.get(f) {
                d.error(n.name().span(), format!("`{f}` is an ethos-u backend setting"), "not for this backend", format!("backend `{}` has only `fallback`", kind.as_str()));
            }
        }
    }
    if kind != Backend::Gpu {
        for f in ["api", "dtype"] {
            if let Some(n) = fields.get(f) {
                d.error(n.name().span(), format!("`{f}` is a gpu backend setting"), "not for this backend", format!("backend `{}` does not take it", kind.as_str()));
            }
        }
    }
    let gpu = if kind == Backend::Gpu {
        let api = match fields.get("api") {
            Some(n) => d.string(n).and_then(|s| d.choice::<GpuApi>(&s)),
            None => Some(GpuApi::Auto),
        };
        let dtype = match fields.get("dtype") {
            Some(n) => d.string(n).and_then(|s| d.choice::<Dtype>(&s)),
            None => Some(Dtype::Float32),
        };
        Some(Some(GpuOptions { api: api?, dtype: dtype? }))
    } else {
        Some(None)
    };
    let accelerator = match fields.get("accelerator") {
        Some(n) => d.string(n).and_then(|s| d.choice::<Accelerator>(&s)),
        None => Some(Accelerator("ethos-u55-128")),
    };
    let text = |d: &mut Decoder, f: &str| match fields.get(f) {
        Some(n) => d.string(n).map(|s| Some(s.value)),
        None => Some(None),
    };
    let (system_config, memory_mode) = (text(d, "system-config"), text(d, "memory-mode"));
    let npu = (kind == Backend::EthosU)
        .then(|| Some(NpuOptions { accelerator: accelerator?, system_config: system_config?, memory_mode: memory_mode? }));
    let npu = match npu {
        Some(o) => Some(Some(o?)),
        None => Some(None),
    };
    Some(BackendSpec { kind, fallback: fallback?, npu: npu?, gpu: gpu?, span: node.name().span() })
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

/// The runner of a recipe without a `runner` node: the generic one, when the templates have it.
fn generic_runner(d: &mut Decoder, catalog: &Catalog) -> Option<RunnerSpec> {
    let span = SourceSpan::from(0..0);
    if !catalog.runners.contains(&GENERIC_RUNNER) {
        let help = suggest::help(GENERIC_RUNNER, catalog.runners, "known runners");
        d.error(span, format!("missing `runner` in the recipe, and the generic runner `{GENERIC_RUNNER}` is not among the templates"), "this recipe has no `runner`", help);
        return None;
    }
    Some(RunnerSpec { template: GENERIC_RUNNER.to_string(), embed_program: false, top: None, span })
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

/// Whether a model takes images or token ids: it decides which `model` fields apply and what
/// `weights` may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModelKind {
    Image,
    Language,
    /// `model "pt2"`: a `torch.export` archive.
    Imported,
    /// `model "pte"`: a prebuilt ExecuTorch program.
    Prebuilt,
}

impl ModelKind {
    /// The kind of model `arch`. An unknown name is taken as the kind of the name it was
    /// probably meant to be, so a misspelt `llama` is not also told it lacks an input shape.
    pub(crate) fn of(arch: &str, catalog: &Catalog) -> ModelKind {
        let language = |name: &str| catalog.language_models.contains(&name);
        if arch == PT2_MODEL {
            return ModelKind::Imported;
        }
        if arch == PTE_MODEL {
            return ModelKind::Prebuilt;
        }
        if language(arch) {
            return ModelKind::Language;
        }
        if catalog.models.contains(&arch) {
            return ModelKind::Image;
        }
        match suggest::closest(arch, catalog.all_models()) {
            Some(best) if language(best) => ModelKind::Language,
            Some(PT2_MODEL) => ModelKind::Imported,
            Some(PTE_MODEL) => ModelKind::Prebuilt,
            _ => ModelKind::Image,
        }
    }

    pub(crate) fn weights_example(self) -> &'static str {
        match self {
            ModelKind::Image => "`weights \"random:1\"` or `weights \"model.safetensors\"`",
            ModelKind::Language => "`weights \"random:1\"` or `weights \"~/models/Llama-3.2-1B\"`",
            ModelKind::Imported => "`archive \"model.pt2\"` (torch.export.save's file)",
            ModelKind::Prebuilt => "`program \"model.pte\"` (an ExecuTorch program)",
        }
    }

    pub(crate) fn path_use(self) -> PathUse {
        match self {
            ModelKind::Image => PathUse::ImageWeights,
            ModelKind::Language => PathUse::LanguageWeights,
            ModelKind::Imported => PathUse::Archive,
            ModelKind::Prebuilt => PathUse::Program,
        }
    }

    /// float16 and 4-bit weights exist only for language models' linears; a prebuilt program
    /// is quantized already.
    pub(crate) fn check_quantize(self, q: Quantize) -> Result<(), Rejection> {
        match (self, q) {
            (ModelKind::Image, Quantize::Fp16 | Quantize::Int4 | Quantize::Int8DynInt4) => Err(Rejection {
                message: format!("`{}` quantization applies to language models only", q.name()),
                label: "not for image models",
                help: "image models take `none` or `int8`".into(),
            }),
            (ModelKind::Imported, Quantize::Fp16 | Quantize::Int4 | Quantize::Int8DynInt4) => Err(Rejection {
                message: format!("`{}` quantization applies to language models only", q.name()),
                label: "not for imported models",
                help: "imported (`pt2`) models take `none` or `int8` (static, calibrated)".into(),
            }),
            (ModelKind::Prebuilt, Quantize::Fp16 | Quantize::Int8 | Quantize::Int4 | Quantize::Int8DynInt4) => Err(Rejection {
                message: format!("`{}` quantization does not apply to a prebuilt program", q.name()),
                label: "not for `pte`",
                help: "a `.pte` program was quantized (or not) when it was exported: remove `quantize` or write `quantize \"none\"`".into(),
            }),
            _ => Ok(()),
        }
    }
}

impl Catalog<'_> {
    /// Image and language model names and the file kinds (`pt2`, `pte`) together, for lookups
    /// and suggestions.
    pub(crate) fn all_models(&self) -> Vec<&str> {
        self.models.iter().chain(self.language_models).copied().chain([PT2_MODEL, PTE_MODEL]).collect()
    }
}
