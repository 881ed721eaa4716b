//! What an LLM program's getter methods say about it (ExecuTorch's exporters write them):
//! sequence limits, vocabulary, BOS/EOS ids, KV-cache flags.

use rbuild_runtime::{KernelRegistry, Program, Value};

/// What the program's getter methods say (absent getters are None / empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    pub max_seq_len: Option<usize>,
    pub max_context_len: Option<usize>,
    pub vocab_size: Option<usize>,
    pub bos_id: Option<u32>,
    pub eos_ids: Vec<u32>,
    pub use_kv_cache: Option<bool>,
    pub enable_dynamic_shape: Option<bool>,
}

pub use crate::getters::getter;

/// The one Int `name` returns (None when the program lacks the method).
pub fn int(program: &Program<'_>, name: &str, kernels: &KernelRegistry) -> Result<Option<i64>, String> {
    one_int(name, getter(program, name, kernels)?)
}

/// The positive count `name` returns.
pub fn positive(program: &Program<'_>, name: &str, kernels: &KernelRegistry) -> Result<Option<usize>, String> {
    count(name, int(program, name, kernels)?)
}

fn one_int(name: &str, vals: Option<Vec<Value>>) -> Result<Option<i64>, String> {
    match vals.as_deref() {
        None => Ok(None),
        Some([Value::Int(v)]) => Ok(Some(*v)),
        Some(other) => Err(format!("method '{name}' should return one Int, returns {}", kinds(other))),
    }
}

fn one_bool(name: &str, vals: Option<Vec<Value>>) -> Result<Option<bool>, String> {
    match vals.as_deref() {
        None => Ok(None),
        Some([Value::Bool(v)]) => Ok(Some(*v)),
        // Older exporters stored flags as ints.
        Some([Value::Int(v)]) => Ok(Some(*v != 0)),
        Some(other) => Err(format!("method '{name}' should return one Bool, returns {}", kinds(other))),
    }
}

fn kinds(vals: &[Value]) -> String {
    if vals.is_empty() {
        return "nothing".into();
    }
    vals.iter().map(Value::kind).collect::<Vec<_>>().join(", ")
}

fn count(name: &str, v: Option<i64>) -> Result<Option<usize>, String> {
    v.map(|x| usize::try_from(x).ok().filter(|&x| x > 0).ok_or_else(|| format!("method '{name}' returns {x}, not a positive count")))
        .transpose()
}

fn token_id(name: &str, v: i64) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("method '{name}' returns {v}, not a token id"))
}

pub fn read_metadata(program: &Program<'_>, kernels: &KernelRegistry) -> Result<Metadata, String> {
    let int = |n: &str| -> Result<Option<i64>, String> { one_int(n, getter(program, n, kernels)?) };
    let flag = |n: &str| -> Result<Option<bool>, String> { one_bool(n, getter(program, n, kernels)?) };
    let eos_ids = match getter(program, "get_eos_ids", kernels)? {
        None => Vec::new(),
        Some(vals) => vals
            .iter()
            .map(|v| match v {
                Value::Int(i) => token_id("get_eos_ids", *i),
                other => Err(format!("method 'get_eos_ids' should return Ints, returns {}", other.kind())),
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Metadata {
        max_seq_len: count("get_max_seq_len", int("get_max_seq_len")?)?,
        max_context_len: count("get_max_context_len", int("get_max_context_len")?)?,
        vocab_size: count("get_vocab_size", int("get_vocab_size")?)?,
        bos_id: int("get_bos_id")?.map(|v| token_id("get_bos_id", v)).transpose()?,
        eos_ids,
        use_kv_cache: flag("use_kv_cache")?,
        enable_dynamic_shape: flag("enable_dynamic_shape")?,
    })
}

