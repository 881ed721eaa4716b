//! The operators the pipeline knows: exact PyTorch/ExecuTorch schemas (checked against
//! `shared/spec/*_schemas.txt` by a test), parsed once into argument lists.
//!
//! A graph node names its functional schema (`aten::add.Tensor`); the out-variant pass maps it
//! to the schema ExecuTorch runs (`aten::add.out`), whose extra keyword-only `Tensor(a!)`
//! arguments are the outputs.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::graph::Arg;

mod create;
mod custom;
mod decomposed;
mod elementwise;
mod layout;
mod nn;
mod prim;
mod reduce;

/// Every table: (functional schema, out-variant schema or "" when the op must be decomposed
/// first).
const TABLES: &[&[(&str, &str)]] = &[
    elementwise::SCHEMAS,
    nn::SCHEMAS,
    layout::SCHEMAS,
    create::SCHEMAS,
    reduce::SCHEMAS,
    prim::SCHEMAS,
    custom::SCHEMAS,
    decomposed::SCHEMAS,
];

/// One argument of a schema.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaArg {
    /// Type as written, without alias annotation: `Tensor`, `Tensor?`, `int[]`, `Scalar`, …
    pub ty: String,
    pub name: String,
    pub default: Option<String>,
    pub kwarg_only: bool,
    /// A `Tensor(a!)` argument after `*`: an output of an out variant.
    pub is_out: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// `namespace::name`
    pub name: String,
    /// Overload, empty for the default.
    pub overload: String,
    pub args: Vec<SchemaArg>,
    pub returns: usize,
}

impl Schema {
    /// `name.overload` (or `name`), as graphs and registries key it.
    pub fn key(&self) -> String {
        rbuild_runtime::kernel::op_key(&self.name, &self.overload)
    }

    /// Arguments that are not outputs.
    pub fn inputs(&self) -> impl Iterator<Item = &SchemaArg> {
        self.args.iter().filter(|a| !a.is_out)
    }
}

/// Parses `ns::name.overload(args) -> returns`.
pub fn parse_schema(text: &str) -> Option<Schema> {
    let open = text.find('(')?;
    let close = text.rfind(") ->")?;
    let full = &text[..open];
    let (name, overload) = match full.split_once('.') {
        Some((n, o)) => (n.to_string(), o.to_string()),
        None => (full.to_string(), String::new()),
    };
    let mut args = Vec::new();
    let mut kw = false;
    for part in split_top(&text[open + 1..close]) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if part == "*" {
            kw = true;
            continue;
        }
        let (decl, default) = match part.split_once('=') {
            Some((d, v)) => (d.trim(), Some(v.trim().to_string())),
            None => (part, None),
        };
        let (ty, name) = decl.rsplit_once(' ')?;
        let is_out = kw && ty.contains('!');
        // Drop alias annotations: `Tensor(a!)` → `Tensor`, `Tensor(a)?` → `Tensor?`.
        let ty: String = {
            let mut t = String::new();
            let mut depth = 0;
            for c in ty.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => t.push(c),
                    _ => {}
                }
            }
            t
        };
        args.push(SchemaArg { ty, name: name.to_string(), default, kwarg_only: kw, is_out });
    }
    let ret = text[close + 4..].trim();
    let returns = match ret {
        "()" => 0,
        _ if ret.starts_with('(') => split_top(&ret[1..ret.len() - 1]).len(),
        _ => 1,
    };
    Some(Schema { name, overload, args, returns })
}

/// Splits on commas outside parentheses/brackets.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A known operator: its functional schema and, when it has one, its out variant.
#[derive(Debug)]
pub struct OpDef {
    pub functional: Schema,
    pub out: Option<Schema>,
    pub functional_text: &'static str,
    pub out_text: &'static str,
}

fn table() -> &'static HashMap<String, OpDef> {
    static TABLE: OnceLock<HashMap<String, OpDef>> = OnceLock::new();
    TABLE.get_or_init(|| {
        TABLES
            .iter()
            .flat_map(|t| t.iter())
            .map(|&(f, o)| {
                let functional = parse_schema(f).expect("valid built-in schema");
                let out = (!o.is_empty()).then(|| parse_schema(o).expect("valid built-in schema"));
                (functional.key(), OpDef { functional, out, functional_text: f, out_text: o })
            })
            .collect()
    })
}

/// Ops whose result is a run-time integer (emitted as prim calls, no tensor output).
pub fn returns_int(key: &str) -> bool {
    matches!(key, "aten::sym_size.int" | "aten::_local_scalar_dense" | "aten::sym_numel") || key.starts_with("executorch_prim::")
}

/// Ops whose result is random (`rand`, dropout in training): each run draws anew, so passes
/// must never evaluate them once at export (functional or out-variant key).
pub fn draws_random(key: &str) -> bool {
    let name = key.split('.').next().unwrap_or(key);
    matches!(name, "aten::rand" | "aten::randn" | "aten::randperm" | "aten::native_dropout")
}

/// In-place ops: emitted under their own schema, with no output values of their own; their
/// effect is the write into their first argument (mutable state), so passes must keep them.
pub fn writes_in_place(key: &str) -> bool {
    key == "aten::copy_"
}

/// Looks an operator up by its functional key (`aten::add.Tensor`, `aten::relu`).
pub fn op(key: &str) -> Option<&'static OpDef> {
    table().get(key)
}

/// Every known operator.
pub fn all() -> impl Iterator<Item = &'static OpDef> {
    table().values()
}

/// The out-variant schema a node runs as: its functional op's out variant, or the node's own
/// op when the out-variant pass already renamed it.
pub fn out_schema(key: &str) -> Option<&'static Schema> {
    if let Some(def) = op(key) {
        return def.out.as_ref();
    }
    all().filter_map(|d| d.out.as_ref()).find(|s| s.key() == key)
}

/// The arguments of a node's out variant: a functional node (`key`) drops the arguments its
/// out schema lacks — the dtype/layout/device/pin_memory of factory ops and `_to_copy`, which
/// the output tensor carries. Out-variant nodes keep theirs.
pub fn out_variant_args(key: &str, args: &[Arg]) -> Vec<Arg> {
    let Some(OpDef { functional, out: Some(out), .. }) = op(key) else { return args.to_vec() };
    functional.args.iter().zip(args).filter(|(f, _)| out.inputs().any(|o| o.name == f.name)).map(|(_, a)| a.clone()).collect()
}

/// Whether an out variant writes its outputs through one `Tensor(a!)[] out` list
/// (`split_with_sizes_copy.out`), one list entry per node output.
pub fn writes_output_list(out: &Schema) -> bool {
    let mut outs = out.args.iter().filter(|a| a.is_out);
    matches!((outs.next(), outs.next()), (Some(a), None) if a.ty == "Tensor[]")
}
