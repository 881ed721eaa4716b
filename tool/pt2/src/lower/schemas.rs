//! The ATen schemas of the targets the lowering maps, so that every argument has a value:
//! `torch.export` omits arguments equal to their default, and the lowering reads them back
//! from here (`stride=1` of `conv2d` is `[1, 1]`).
//!
//! Ops whose ATen name is also an export-IR op (`aten::convolution`, `aten::mm`, …) take their
//! schema from `rbuild_export::ops`, which is checked against PyTorch's; this table holds the
//! rest: the training IR's composite ops, aliasing views and in-place forms without a
//! functional twin.

use std::collections::HashMap;
use std::sync::OnceLock;

use rbuild_export::ops::{parse_schema, Schema, SchemaArg};

use crate::schema::{Argument, MemoryFormat, Node, SerdeDtype};

/// PyTorch's schemas (native_functions.yaml), as `torch.ops.aten.<op>.<overload>._schema`
/// prints them.
const ATEN_SCHEMAS: &[&str] = &[
    // Training-IR composites.
    "aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, SymInt[1] padding=0, SymInt[1] dilation=1, SymInt groups=1) -> Tensor",
    "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
    "aten::conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
    "aten::conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, SymInt[1] padding=0, SymInt[1] output_padding=0, SymInt groups=1, SymInt[1] dilation=1) -> Tensor",
    "aten::conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor",
    "aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
    "aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
    "aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
    "aten::dropout(Tensor input, float p, bool train) -> Tensor",
    "aten::feature_dropout(Tensor input, float p, bool train) -> Tensor",
    "aten::alpha_dropout(Tensor input, float p, bool train) -> Tensor",
    "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor",
    "aten::matmul(Tensor self, Tensor other) -> Tensor",
    "aten::relu6(Tensor self) -> Tensor",
    "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
    "aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
    "aten::clamp_min(Tensor self, Scalar min) -> Tensor",
    "aten::clamp_max(Tensor self, Scalar max) -> Tensor",
    "aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::__or__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::__xor__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor",
    "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    "aten::all(Tensor self) -> Tensor",
    "aten::all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
    "aten::all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
    "aten::linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "aten::masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
    "aten::isfinite(Tensor self) -> Tensor",
    "aten::__and__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::__or__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::__xor__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::__lshift__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::__lshift__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::__rshift__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::__rshift__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor",
    "aten::instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor",
    "aten::_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    "aten::pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor",
    "aten::cdist(Tensor x1, Tensor x2, float p=2., int? compute_mode=None) -> Tensor",
    "aten::pdist(Tensor self, float p=2) -> Tensor",
    "aten::grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor",
    "aten::max_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool ceil_mode=False) -> Tensor",
    "aten::adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor",
    "aten::avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, bool ceil_mode=False, bool count_include_pad=True) -> Tensor",
    "aten::max_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, int[1] dilation=1, bool ceil_mode=False) -> Tensor",
    "aten::adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor",
    "aten::std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
    "aten::std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
    "aten::_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)",
    "aten::_upsample_bilinear2d_aa.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor",
    // Conversions.
    "aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
    "aten::to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
    "aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
    "aten::to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
    "aten::type_as(Tensor self, Tensor other) -> Tensor",
    // Creation.
    "aten::arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::empty_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::new_empty(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    // Views and aliases (the IR has their `_copy` forms).
    "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
    "aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
    "aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
    "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)",
    "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
    "aten::t(Tensor(a) self) -> Tensor(a)",
    "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)",
    "aten::squeeze(Tensor(a) self) -> Tensor(a)",
    "aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)",
    "aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)",
    "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
    "aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
    "aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
    "aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)",
    "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
    "aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
    "aten::chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]",
    "aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]",
    "aten::alias(Tensor(a) self) -> Tensor(a)",
    "aten::diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)",
    "aten::as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)",
    "aten::unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)",
    "aten::narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)",
    "aten::detach(Tensor(a) self) -> Tensor(a)",
    "aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)",
    "aten::lift_fresh_copy(Tensor self) -> Tensor",
    // In-place forms without a functional twin of the same arguments.
    "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    "aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)",
    "aten::zero_(Tensor(a!) self) -> Tensor(a!)",
    // Checks and shape queries.
    "aten::_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None, ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()",
    "aten::_assert_scalar(Scalar self, str assert_msg) -> ()",
    "aten::sym_constrain_range_for_size(Scalar size, *, int? min=None, int? max=None) -> ()",
    "aten::sym_constrain_range(Scalar size, *, int? min=None, int? max=None) -> ()",
    "aten::sym_stride.int(Tensor self, int dim) -> SymInt",
    "aten::sym_storage_offset(Tensor self) -> SymInt",
    // Python operators on sizes (`torch.export` names their arguments a and b).
    "_operator.add(Scalar a, Scalar b) -> Scalar",
    "_operator.sub(Scalar a, Scalar b) -> Scalar",
    "_operator.mul(Scalar a, Scalar b) -> Scalar",
    "_operator.floordiv(Scalar a, Scalar b) -> Scalar",
    "_operator.mod(Scalar a, Scalar b) -> Scalar",
    "_operator.eq(Scalar a, Scalar b) -> bool",
    "_operator.ne(Scalar a, Scalar b) -> bool",
    "_operator.lt(Scalar a, Scalar b) -> bool",
    "_operator.le(Scalar a, Scalar b) -> bool",
    "_operator.gt(Scalar a, Scalar b) -> bool",
    "_operator.ge(Scalar a, Scalar b) -> bool",
    "_operator.and_(Scalar a, Scalar b) -> bool",
    "_operator.neg(Scalar a) -> Scalar",
    "_operator.not_(Scalar a) -> bool",
    "torch.sym_max(Scalar a, Scalar b) -> Scalar",
    "torch.sym_min(Scalar a, Scalar b) -> Scalar",
    "torch.sym_not(Scalar a) -> bool",
];

fn table() -> &'static HashMap<String, Schema> {
    static TABLE: OnceLock<HashMap<String, Schema>> = OnceLock::new();
    TABLE.get_or_init(|| {
        ATEN_SCHEMAS
            .iter()
            .map(|text| {
                let schema = parse_schema(text).expect("valid built-in schema");
                (schema.key(), schema)
            })
            .collect()
    })
}

/// `aten::conv2d.default` → `aten::conv2d` (how schemas key the default overload).
pub(crate) fn schema_key(op_name: &str) -> &str {
    op_name.strip_suffix(".default").unwrap_or(op_name)
}

/// The schema of a target (`aten::add.Tensor`), from this table or the export IR's.
pub(crate) fn schema(key: &str) -> Option<&'static Schema> {
    table().get(key).or_else(|| rbuild_export::ops::op(key).map(|d| &d.functional))
}

/// One node's arguments by schema name, omitted ones filled with their defaults.
#[derive(Clone)]
pub(crate) struct NodeArgs<'n> {
    values: Vec<(&'static str, ArgValue<'n>)>,
}

/// An argument as the node gave it, or its schema default.
#[derive(Clone)]
enum ArgValue<'n> {
    Given(&'n Argument),
    Default(Argument),
}

impl<'n> NodeArgs<'n> {
    /// Resolves `node` against `schema`; unknown argument names and missing arguments that
    /// have no default are errors.
    pub fn resolve(node: &'n Node, schema: &'static Schema) -> Result<Self, String> {
        if let Some(extra) = node.inputs.iter().find(|a| !schema.args.iter().any(|s| s.name == a.name)) {
            return Err(format!("argument '{}' is not in the schema of {}", extra.name, schema.key()));
        }
        let mut values = Vec::with_capacity(schema.args.len());
        for arg in schema.args.iter().filter(|a| !a.is_out) {
            let value = match node.input(&arg.name) {
                Some(given) => ArgValue::Given(given),
                None => ArgValue::Default(default_value(arg).ok_or_else(|| {
                    format!("argument '{}' is missing and {} gives it no default", arg.name, schema.key())
                })?),
            };
            values.push((arg.name.as_str(), value));
        }
        Ok(NodeArgs { values })
    }

    /// The names of the arguments, in schema order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.values.iter().map(|(n, _)| *n)
    }

    /// The argument named `name` (given or default).
    pub fn get(&self, name: &str) -> Result<&Argument, String> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| match v {
                ArgValue::Given(a) => *a,
                ArgValue::Default(a) => a,
            })
            .ok_or_else(|| format!("the schema has no argument '{name}'"))
    }
}

/// A schema default as the argument the node would have carried (`int[2] stride=1` is
/// `[1, 1]`, `float eps=1e-05`, `str approximate="none"`, `None`).
fn default_value(arg: &SchemaArg) -> Option<Argument> {
    let text = arg.default.as_deref()?;
    if text == "None" {
        return Some(Argument::None(true));
    }
    let base = arg.ty.trim_end_matches('?');
    let list_len = |ty: &str| -> Option<usize> {
        let inner = ty.split_once('[')?.1.strip_suffix(']')?;
        Some(inner.parse().unwrap_or(0))
    };
    Some(match base {
        ty if ty.starts_with("int[") || ty.starts_with("SymInt[") => {
            if let Some(items) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                let values = items.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().ok());
                Argument::Ints(values.collect::<Option<Vec<i64>>>()?)
            } else {
                // A single value stands for every entry of a fixed-length list.
                Argument::Ints(vec![text.parse().ok()?; list_len(ty)?.max(1)])
            }
        }
        "int" | "SymInt" => Argument::Int(text.parse().ok()?),
        "float" => Argument::Float(text.parse().ok()?),
        "bool" => Argument::Bool(match text {
            "True" => true,
            "False" => false,
            _ => return None,
        }),
        "str" => Argument::String(text.trim_matches(|c| c == '"' || c == '\'').to_string()),
        "Scalar" => match text.parse::<i64>() {
            Ok(i) => Argument::Int(i),
            Err(_) => Argument::Float(text.parse().ok()?),
        },
        "MemoryFormat" if text == "contiguous_format" => Argument::MemoryFormat(MemoryFormat::ContiguousFormat),
        // ATen writes a dtype default as its c10::ScalarType number (`dtype=4`: int64).
        "ScalarType" => {
            let code: i64 = text.parse().ok()?;
            let dtype = rbuild_runtime::ScalarType::from_code(code)?;
            Argument::ScalarType(SerdeDtype::from_scalar_type(dtype)?)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_parses_and_defaults_parse_for_their_types() {
        for text in ATEN_SCHEMAS {
            let schema = parse_schema(text).unwrap_or_else(|| panic!("{text}"));
            for arg in schema.args.iter().filter(|a| a.default.is_some()) {
                assert!(default_value(arg).is_some(), "{text}: default of {}", arg.name);
            }
        }
    }

    #[test]
    fn list_defaults_fill_every_entry() {
        let conv = schema("aten::conv2d").unwrap();
        let stride = conv.args.iter().find(|a| a.name == "stride").unwrap();
        assert_eq!(default_value(stride), Some(Argument::Ints(vec![1, 1])));
        let pool = schema("aten::max_pool2d").unwrap();
        let stride = pool.args.iter().find(|a| a.name == "stride").unwrap();
        assert_eq!(default_value(stride), Some(Argument::Ints(vec![])));
        let ln = schema("aten::layer_norm").unwrap();
        let eps = ln.args.iter().find(|a| a.name == "eps").unwrap();
        assert_eq!(default_value(eps), Some(Argument::Float(1e-5)));
    }

    /// Where the spec lists an op, this table's schema is exactly PyTorch's.
    #[test]
    fn schemas_the_spec_lists_match_it() {
        let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/core_aten_schemas.txt");
        let Ok(text) = std::fs::read_to_string(&spec) else { return };
        let lines: std::collections::HashSet<&str> = text.lines().map(str::trim).collect();
        let mut found = 0;
        for schema in ATEN_SCHEMAS {
            let name = schema.split('(').next().unwrap();
            if lines.iter().any(|l| l.starts_with(&format!("{name}("))) {
                assert!(lines.contains(schema), "{schema} differs from the spec");
                found += 1;
            }
        }
        assert!(found >= 5, "only {found} schemas found in the spec");
    }
}
