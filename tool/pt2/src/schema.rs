//! Serde types for the serialized `ExportedProgram` (PyTorch's `torch/_export/serde/schema.py`,
//! schema 8.x) and the archive's payload configs.
//!
//! The JSON mirrors Python dataclasses: a `_Union` is an object with exactly one key (e.g.
//! `{"as_tensor": {"name": "x"}}`), which is serde's externally tagged enum. Field names are the
//! schema's; union variants drop the `as_` prefix (`Argument::Tensor` is `as_tensor`). Unknown
//! object fields are ignored, so a newer 8.x minor that only adds fields still parses; an
//! unknown union variant is an error naming it and its JSON path.
//!
//! Enums that the schema stores as integers (dtype, layout, memory format) keep their serde
//! numbering here; [`SerdeDtype::scalar_type`] maps dtypes to rbuild's (ExecuTorch's) numbering,
//! which differs (serde's float32 is 7, ExecuTorch's 6).

use std::collections::BTreeMap;

use rbuild_runtime::ScalarType;
use serde::Deserialize;

/// An enum the schema serializes as its variant's position (0, 1, …).
macro_rules! serial_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal, [$($variant:ident),+]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        #[serde(try_from = "i64")]
        pub enum $name {
            $($variant),+
        }

        impl TryFrom<i64> for $name {
            type Error = String;
            fn try_from(v: i64) -> Result<Self, String> {
                const ALL: &[$name] = &[$($name::$variant),+];
                usize::try_from(v)
                    .ok()
                    .and_then(|i| ALL.get(i).copied())
                    .ok_or_else(|| format!(concat!("unknown ", $what, " {} (expected 0..={})"), v, ALL.len() - 1))
            }
        }
    };
}

/// The schema major version this reader understands.
pub const SUPPORTED_SCHEMA_MAJOR: i64 = 8;

/// The top-level document of `models/<name>.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ExportedProgram {
    pub graph_module: GraphModule,
    /// Opset namespace (e.g. `aten`) → version.
    pub opset_version: BTreeMap<String, i64>,
    /// Symbol (e.g. `s27`) → its value range.
    pub range_constraints: BTreeMap<String, RangeConstraint>,
    pub schema_version: SchemaVersion,
    /// `TRAINING` for the default IR, `ATEN` after `run_decompositions()`.
    #[serde(default)]
    pub verifiers: Vec<String>,
    #[serde(default)]
    pub torch_version: Option<String>,
    #[serde(default)]
    pub guards_code: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct SchemaVersion {
    pub major: i64,
    pub minor: i64,
}

/// The inclusive range of a symbol. `None` is unbounded (PyTorch's `int_oo` / `-int_oo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct RangeConstraint {
    pub min_val: Option<i64>,
    pub max_val: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct GraphModule {
    pub graph: Graph,
    pub signature: GraphSignature,
    #[serde(default)]
    pub module_call_graph: Vec<ModuleCallEntry>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModuleCallEntry {
    pub fqn: String,
    #[serde(default)]
    pub signature: Option<ModuleCallSignature>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModuleCallSignature {
    pub inputs: Vec<Argument>,
    pub outputs: Vec<Argument>,
    /// A pytree spec, serialized as a JSON string.
    pub in_spec: String,
    pub out_spec: String,
    #[serde(default)]
    pub forward_arg_names: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Graph {
    /// Placeholders, in the order of the signature's input specs.
    pub inputs: Vec<Argument>,
    /// Returned values, in the order of the signature's output specs.
    pub outputs: Vec<Argument>,
    pub nodes: Vec<Node>,
    /// Metadata of every tensor value, by name.
    pub tensor_values: BTreeMap<String, TensorMeta>,
    pub sym_int_values: BTreeMap<String, SymInt>,
    pub sym_bool_values: BTreeMap<String, SymBool>,
    #[serde(default)]
    pub is_single_tensor_return: bool,
    #[serde(default)]
    pub custom_obj_values: BTreeMap<String, CustomObjArgument>,
    #[serde(default)]
    pub sym_float_values: BTreeMap<String, SymFloat>,
}

/// One call: `target` is the operator's Python path (`torch.ops.aten.conv2d.default`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Node {
    pub target: String,
    /// Arguments by schema name. Arguments equal to the operator's default are omitted by
    /// torch and not filled in here: the lowering takes them from the operator schema.
    pub inputs: Vec<NamedArgument>,
    pub outputs: Vec<Argument>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub is_hop_single_tensor_return: Option<bool>,
    #[serde(default)]
    pub name: Option<String>,
}

impl Node {
    /// The target as `namespace::name.overload` (`aten::conv2d.default`), the testdata's and
    /// ExecuTorch's spelling; targets not under `torch.ops.` are returned unchanged.
    pub fn op_name(&self) -> String {
        match self.target.strip_prefix("torch.ops.").and_then(|rest| rest.split_once('.')) {
            Some((namespace, op)) => format!("{namespace}::{op}"),
            None => self.target.clone(),
        }
    }

    /// The argument with this schema name, if the writer kept it.
    pub fn input(&self, name: &str) -> Option<&Argument> {
        self.inputs.iter().find(|a| a.name == name).map(|a| &a.arg)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NamedArgument {
    /// The argument's name in the operator schema.
    pub name: String,
    pub arg: Argument,
    #[serde(default)]
    pub kind: Option<ArgumentKind>,
}

serial_enum! {
    /// Whether a node argument was passed by position or by keyword.
    ArgumentKind, "argument kind", [Unknown, Positional, Keyword]
}

/// A node argument or output (schema `Argument`, every kind of schema 8.20).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum Argument {
    #[serde(rename = "as_none")]
    None(bool),
    #[serde(rename = "as_tensor")]
    Tensor(TensorArgument),
    #[serde(rename = "as_tensors")]
    Tensors(Vec<TensorArgument>),
    #[serde(rename = "as_int")]
    Int(i64),
    #[serde(rename = "as_ints")]
    Ints(Vec<i64>),
    #[serde(rename = "as_float", deserialize_with = "float")]
    Float(f64),
    #[serde(rename = "as_floats", deserialize_with = "floats")]
    Floats(Vec<f64>),
    #[serde(rename = "as_string")]
    String(String),
    #[serde(rename = "as_strings")]
    Strings(Vec<String>),
    #[serde(rename = "as_sym_int")]
    SymInt(SymIntArgument),
    #[serde(rename = "as_sym_ints")]
    SymInts(Vec<SymIntArgument>),
    #[serde(rename = "as_scalar_type")]
    ScalarType(SerdeDtype),
    #[serde(rename = "as_memory_format")]
    MemoryFormat(MemoryFormat),
    #[serde(rename = "as_layout")]
    Layout(Layout),
    #[serde(rename = "as_device")]
    Device(Device),
    #[serde(rename = "as_bool")]
    Bool(bool),
    #[serde(rename = "as_bools")]
    Bools(Vec<bool>),
    #[serde(rename = "as_sym_bool")]
    SymBool(SymBoolArgument),
    #[serde(rename = "as_sym_bools")]
    SymBools(Vec<SymBoolArgument>),
    /// A subgraph of a higher-order op (`cond`, `map`, …).
    #[serde(rename = "as_graph")]
    Graph(Box<GraphArgument>),
    #[serde(rename = "as_optional_tensors")]
    OptionalTensors(Vec<OptionalTensorArgument>),
    #[serde(rename = "as_custom_obj")]
    CustomObj(CustomObjArgument),
    /// An operator passed as a value (its target string).
    #[serde(rename = "as_operator")]
    Operator(String),
    #[serde(rename = "as_sym_float")]
    SymFloat(SymFloatArgument),
    #[serde(rename = "as_sym_floats")]
    SymFloats(Vec<SymFloatArgument>),
    #[serde(rename = "as_optional_tensor")]
    OptionalTensor(OptionalTensorArgument),
    #[serde(rename = "as_complex")]
    Complex(ComplexValue),
    #[serde(rename = "as_nested_tensors")]
    NestedTensors(Vec<Vec<TensorArgument>>),
    #[serde(rename = "as_int_lists")]
    IntLists(Vec<Vec<i64>>),
    #[serde(rename = "as_float_lists", deserialize_with = "float_lists")]
    FloatLists(Vec<Vec<f64>>),
    #[serde(rename = "as_string_to_argument")]
    StringToArgument(BTreeMap<String, Argument>),
}

impl Argument {
    /// The schema's key for this kind (`as_tensor`, …), for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Argument::None(_) => "as_none",
            Argument::Tensor(_) => "as_tensor",
            Argument::Tensors(_) => "as_tensors",
            Argument::Int(_) => "as_int",
            Argument::Ints(_) => "as_ints",
            Argument::Float(_) => "as_float",
            Argument::Floats(_) => "as_floats",
            Argument::String(_) => "as_string",
            Argument::Strings(_) => "as_strings",
            Argument::SymInt(_) => "as_sym_int",
            Argument::SymInts(_) => "as_sym_ints",
            Argument::ScalarType(_) => "as_scalar_type",
            Argument::MemoryFormat(_) => "as_memory_format",
            Argument::Layout(_) => "as_layout",
            Argument::Device(_) => "as_device",
            Argument::Bool(_) => "as_bool",
            Argument::Bools(_) => "as_bools",
            Argument::SymBool(_) => "as_sym_bool",
            Argument::SymBools(_) => "as_sym_bools",
            Argument::Graph(_) => "as_graph",
            Argument::OptionalTensors(_) => "as_optional_tensors",
            Argument::CustomObj(_) => "as_custom_obj",
            Argument::Operator(_) => "as_operator",
            Argument::SymFloat(_) => "as_sym_float",
            Argument::SymFloats(_) => "as_sym_floats",
            Argument::OptionalTensor(_) => "as_optional_tensor",
            Argument::Complex(_) => "as_complex",
            Argument::NestedTensors(_) => "as_nested_tensors",
            Argument::IntLists(_) => "as_int_lists",
            Argument::FloatLists(_) => "as_float_lists",
            Argument::StringToArgument(_) => "as_string_to_argument",
        }
    }

    /// The tensor's name if this is a single tensor.
    pub fn tensor_name(&self) -> Option<&str> {
        match self {
            Argument::Tensor(t) | Argument::OptionalTensor(OptionalTensorArgument::Tensor(t)) => Some(&t.name),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TensorArgument {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TokenArgument {
    pub name: String,
}

/// An element of a `Tensor?` or `Tensor?[]` argument.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum OptionalTensorArgument {
    #[serde(rename = "as_tensor")]
    Tensor(TensorArgument),
    #[serde(rename = "as_none")]
    None(bool),
}

/// A SymInt argument: a named symbolic value (`as_name`, a key of `sym_int_values`), or a
/// plain integer inside a mixed list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum SymIntArgument {
    #[serde(rename = "as_name")]
    Name(String),
    #[serde(rename = "as_int")]
    Int(i64),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum SymFloatArgument {
    #[serde(rename = "as_name")]
    Name(String),
    #[serde(rename = "as_float", deserialize_with = "float")]
    Float(f64),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum SymBoolArgument {
    #[serde(rename = "as_name")]
    Name(String),
    #[serde(rename = "as_bool")]
    Bool(bool),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct GraphArgument {
    pub name: String,
    pub graph: Graph,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CustomObjArgument {
    pub name: String,
    pub class_fqn: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct ComplexValue {
    #[serde(deserialize_with = "float")]
    pub real: f64,
    #[serde(deserialize_with = "float")]
    pub imag: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Device {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub index: Option<i64>,
}

/// A size, stride or offset: a plain integer or a symbolic expression.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum SymInt {
    #[serde(rename = "as_expr")]
    Expr(SymExpr),
    #[serde(rename = "as_int")]
    Int(i64),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum SymFloat {
    #[serde(rename = "as_expr")]
    Expr(SymExpr),
    #[serde(rename = "as_float", deserialize_with = "float")]
    Float(f64),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum SymBool {
    #[serde(rename = "as_expr")]
    Expr(SymExpr),
    #[serde(rename = "as_bool")]
    Bool(bool),
}

/// A sympy expression as text: `Symbol('s27', positive=True, integer=True)` (sympy's `srepr`)
/// or `s27`, `2*s27`, … with the value seen at export as `hint`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SymExpr {
    pub expr_str: String,
    #[serde(default)]
    pub hint: Option<SymExprHint>,
}

impl SymExpr {
    /// The symbol's name when the expression is one bare symbol (`s27` or
    /// `Symbol('s27', …)`), `None` for a compound expression.
    pub fn symbol(&self) -> Option<&str> {
        let s = self.expr_str.trim();
        let is_ident = |t: &str| {
            let mut chars = t.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if is_ident(s) {
            return Some(s);
        }
        let inner = s.strip_prefix("Symbol('")?;
        let (name, rest) = inner.split_once('\'')?;
        // `rest` holds only keyword flags: a second symbol would make it compound.
        (is_ident(name) && rest.ends_with(')') && !rest.contains('(')).then_some(name)
    }

    pub fn int_hint(&self) -> Option<i64> {
        match self.hint {
            Some(SymExprHint::Int(v)) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub enum SymExprHint {
    #[serde(rename = "as_int")]
    Int(i64),
    #[serde(rename = "as_bool")]
    Bool(bool),
    #[serde(rename = "as_float", deserialize_with = "float")]
    Float(f64),
}

/// torch writes non-finite floats as the strings `Infinity`, `-Infinity` and `NaN` (plain
/// JSON has no spelling for them).
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonFloat {
    Number(f64),
    Text(String),
}

impl JsonFloat {
    fn value<E: serde::de::Error>(self) -> Result<f64, E> {
        match self {
            JsonFloat::Number(v) => Ok(v),
            JsonFloat::Text(t) => match t.as_str() {
                "Infinity" | "inf" => Ok(f64::INFINITY),
                "-Infinity" | "-inf" => Ok(f64::NEG_INFINITY),
                "NaN" | "nan" => Ok(f64::NAN),
                _ => Err(E::custom(format!("expected a number, Infinity, -Infinity or NaN, found {t:?}"))),
            },
        }
    }
}

fn float<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    JsonFloat::deserialize(d)?.value()
}

fn floats<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Vec::<JsonFloat>::deserialize(d)?.into_iter().map(JsonFloat::value).collect()
}

fn float_lists<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Vec<f64>>, D::Error> {
    Vec::<Vec<JsonFloat>>::deserialize(d)?.into_iter().map(|l| l.into_iter().map(JsonFloat::value).collect()).collect()
}

/// Metadata of one tensor value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TensorMeta {
    pub dtype: SerdeDtype,
    pub sizes: Vec<SymInt>,
    #[serde(default)]
    pub requires_grad: bool,
    pub device: Device,
    pub strides: Vec<SymInt>,
    pub storage_offset: SymInt,
    pub layout: Layout,
}

/// A dtype in the serde schema's numbering (not ExecuTorch's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct SerdeDtype(pub i64);

impl SerdeDtype {
    /// The serde number of rbuild's dtype, when the schema has one.
    pub fn from_scalar_type(t: ScalarType) -> Option<SerdeDtype> {
        (0..=40).map(SerdeDtype).find(|d| d.scalar_type() == Some(t))
    }

    /// rbuild's dtype for this serde number; `None` for `UNKNOWN`, `FLOAT8E8M0FNU` (which
    /// ExecuTorch lacks) and numbers the schema does not define.
    pub fn scalar_type(self) -> Option<ScalarType> {
        use ScalarType as S;
        Some(match self.0 {
            1 => S::Byte,
            2 => S::Char,
            3 => S::Short,
            4 => S::Int,
            5 => S::Long,
            6 => S::Half,
            7 => S::Float,
            8 => S::Double,
            9 => S::ComplexHalf,
            10 => S::ComplexFloat,
            11 => S::ComplexDouble,
            12 => S::Bool,
            13 => S::BFloat16,
            28 => S::UInt16,
            29 => S::Float8e4m3fn,
            30 => S::Float8e5m2,
            31 => S::Float8e4m3fnuz,
            32 => S::Float8e5m2fnuz,
            34 => S::UInt32,
            35 => S::UInt64,
            _ => return None,
        })
    }

    /// The schema's name for this number, for messages.
    pub fn schema_name(self) -> String {
        match self.0 {
            0 => "UNKNOWN".into(),
            33 => "FLOAT8E8M0FNU".into(),
            _ => match self.scalar_type() {
                Some(t) => t.name().to_string(),
                None => format!("<undefined dtype {}>", self.0),
            },
        }
    }
}

serial_enum! {
    /// `torch.layout`; `Mkldnn` is the schema's `_mkldnn`.
    Layout, "layout", [Unknown, SparseCoo, SparseCsr, SparseCsc, SparseBsr, SparseBsc, Mkldnn, Strided]
}

serial_enum! {
    /// `torch.memory_format`.
    MemoryFormat, "memory format", [Unknown, ContiguousFormat, ChannelsLast, ChannelsLast3d, PreserveFormat]
}

#[derive(Debug, Clone, Deserialize)]
pub struct GraphSignature {
    pub input_specs: Vec<InputSpec>,
    pub output_specs: Vec<OutputSpec>,
}

/// What a graph placeholder is. The graph's `inputs` follow this list's order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum InputSpec {
    #[serde(rename = "user_input")]
    UserInput { arg: Argument },
    #[serde(rename = "parameter")]
    Parameter { arg: TensorArgument, parameter_name: String },
    #[serde(rename = "buffer")]
    Buffer { arg: TensorArgument, buffer_name: String, persistent: bool },
    #[serde(rename = "tensor_constant")]
    TensorConstant { arg: TensorArgument, tensor_constant_name: String },
    #[serde(rename = "custom_obj")]
    CustomObj { arg: CustomObjArgument, custom_obj_name: String },
    #[serde(rename = "token")]
    Token { arg: TokenArgument },
    #[serde(rename = "constant_input")]
    ConstantInput { name: String, value: ConstantValue },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum ConstantValue {
    #[serde(rename = "as_none")]
    None(bool),
    #[serde(rename = "as_int")]
    Int(i64),
    #[serde(rename = "as_float", deserialize_with = "float")]
    Float(f64),
    #[serde(rename = "as_string")]
    String(String),
    #[serde(rename = "as_bool")]
    Bool(bool),
}

/// What a graph output is. The graph's `outputs` follow this list's order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub enum OutputSpec {
    #[serde(rename = "user_output")]
    UserOutput { arg: Argument },
    #[serde(rename = "loss_output")]
    LossOutput { arg: TensorArgument },
    #[serde(rename = "buffer_mutation")]
    BufferMutation { arg: TensorArgument, buffer_name: String },
    #[serde(rename = "gradient_to_parameter")]
    GradientToParameter { arg: TensorArgument, parameter_name: String },
    #[serde(rename = "gradient_to_user_input")]
    GradientToUserInput { arg: TensorArgument, user_input_name: String },
    #[serde(rename = "user_input_mutation")]
    UserInputMutation { arg: TensorArgument, user_input_name: String },
    #[serde(rename = "token")]
    Token { arg: TokenArgument },
    #[serde(rename = "parameter_mutation")]
    ParameterMutation { arg: TensorArgument, parameter_name: String },
}

impl OutputSpec {
    pub fn kind_name(&self) -> &'static str {
        match self {
            OutputSpec::UserOutput { .. } => "user_output",
            OutputSpec::LossOutput { .. } => "loss_output",
            OutputSpec::BufferMutation { .. } => "buffer_mutation",
            OutputSpec::GradientToParameter { .. } => "gradient_to_parameter",
            OutputSpec::GradientToUserInput { .. } => "gradient_to_user_input",
            OutputSpec::UserInputMutation { .. } => "user_input_mutation",
            OutputSpec::Token { .. } => "token",
            OutputSpec::ParameterMutation { .. } => "parameter_mutation",
        }
    }
}

/// `data/weights/<model>_weights_config.json` and `data/constants/<model>_constants_config.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PayloadConfig {
    /// Fully qualified name (`features.0.0.weight`) → where its bytes are.
    pub config: BTreeMap<String, PayloadMeta>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PayloadMeta {
    /// The storage file, relative to the config's folder (`weight_0`).
    pub path_name: String,
    pub is_param: bool,
    /// Pickled payloads (custom objects, tensor subclasses) are never read.
    pub use_pickle: bool,
    /// Absent for custom objects.
    #[serde(default)]
    pub tensor_meta: Option<TensorMeta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(text: &str) -> SymExpr {
        SymExpr { expr_str: text.to_string(), hint: None }
    }

    #[test]
    fn only_a_lone_symbol_is_a_symbol() {
        assert_eq!(expr("s27").symbol(), Some("s27"));
        assert_eq!(expr("Symbol('s27', positive=True, integer=True)").symbol(), Some("s27"));
        assert_eq!(expr("Mul(Integer(100), Symbol('s27', positive=True, integer=True))").symbol(), None);
        assert_eq!(expr("2*s27").symbol(), None);
        assert_eq!(expr("s27 + 1").symbol(), None);
        assert_eq!(expr("Symbol('s1', integer=True) + Symbol('s2')").symbol(), None);
    }

    #[test]
    fn floats_accept_torchs_non_finite_spellings() {
        let args: Vec<Argument> =
            serde_json::from_str(r#"[{"as_float": "-Infinity"}, {"as_floats": [1.5, "Infinity", "NaN"]}]"#).unwrap();
        assert_eq!(args[0], Argument::Float(f64::NEG_INFINITY));
        let Argument::Floats(values) = &args[1] else { panic!("{args:?}") };
        assert_eq!(values[..2], [1.5, f64::INFINITY]);
        assert!(values[2].is_nan());
        assert!(serde_json::from_str::<Argument>(r#"{"as_float": "many"}"#).is_err());
    }

    #[test]
    fn serial_enums_reject_numbers_past_their_last_variant() {
        assert_eq!(Layout::try_from(7), Ok(Layout::Strided));
        assert_eq!(MemoryFormat::try_from(2), Ok(MemoryFormat::ChannelsLast));
        assert!(Layout::try_from(8).unwrap_err().contains("unknown layout 8 (expected 0..=7)"));
        assert!(ArgumentKind::try_from(-1).is_err());
    }
}
