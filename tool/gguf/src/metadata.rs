//! The metadata section (key/value pairs in file order) and the typed accessors on
//! [`GgufFile`], whose errors name the key and both types.

use std::collections::HashMap;

use crate::reader::ByteCursor;
use crate::value::{read_value, read_value_type, Value};
use crate::{GgufError, GgufFile};

/// The fewest bytes a metadata entry takes: key length, value type, a one-byte value.
const MIN_ENTRY_BYTES: usize = 8 + 4 + 1;

/// Metadata in file order, with an index by key.
#[derive(Debug, Default)]
pub(crate) struct Metadata {
    pub entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }
}

/// Reads `count` key/value pairs. Keys must be non-empty and unique.
pub(crate) fn read_metadata(cursor: &mut ByteCursor<'_>, count: u64) -> Result<Metadata, String> {
    let count = cursor.check_count(count, MIN_ENTRY_BYTES, "the metadata entry count")?;
    let mut metadata = Metadata { entries: Vec::with_capacity(count), index: HashMap::with_capacity(count) };
    for entry in 0..count {
        let key = cursor.string("a metadata key").map_err(|e| format!("metadata entry {entry}: {e}"))?;
        if key.is_empty() {
            return Err(format!("metadata entry {entry} has an empty key"));
        }
        if metadata.index.contains_key(&key) {
            return Err(format!("metadata key '{key}' appears twice (entries {} and {entry})", metadata.index[&key]));
        }
        let value = read_value_type(cursor, "the value type")
            .and_then(|ty| read_value(cursor, ty, 0))
            .map_err(|e| format!("metadata key '{key}': {e}"))?;
        metadata.index.insert(key.clone(), metadata.entries.len());
        metadata.entries.push((key, value));
    }
    Ok(metadata)
}

impl GgufFile {
    /// Every key/value pair, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata.entries
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    fn wrong_type(&self, key: &str, value: &Value, expected: &str) -> GgufError {
        self.error(format!("metadata key '{key}' has type {}, expected {expected}", value.describe_type()))
    }

    /// A string value; Err when the key holds another type.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_str().map(Some).ok_or_else(|| self.wrong_type(key, value, "str")),
        }
    }

    /// Any integer type holding a value >= 0.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        if let Some(v) = value.as_u64() {
            return Ok(Some(v));
        }
        match value.as_i64() {
            Some(negative) => Err(self.error(format!(
                "metadata key '{key}' is {negative} ({}), expected a non-negative integer",
                value.type_name()
            ))),
            None => Err(self.wrong_type(key, value, "an unsigned integer")),
        }
    }

    /// F32, F64 or any integer type, as f64.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_f64().map(Some).ok_or_else(|| self.wrong_type(key, value, "a number")),
        }
    }

    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_bool().map(Some).ok_or_else(|| self.wrong_type(key, value, "bool")),
        }
    }

    /// An array of strings (`tokenizer.ggml.tokens`, `.merges`).
    pub fn get_str_array(&self, key: &str) -> Result<Option<Vec<&str>>, GgufError> {
        self.get_array(key, "arr[str]", Value::as_str)
    }

    /// An array of numbers (floats or integers), as f64 (`tokenizer.ggml.scores`).
    pub fn get_f64_array(&self, key: &str) -> Result<Option<Vec<f64>>, GgufError> {
        self.get_array(key, "an array of numbers", Value::as_f64)
    }

    /// An array of integers, as i64 (`tokenizer.ggml.token_type`); a u64 element above
    /// i64::MAX is an error.
    pub fn get_i64_array(&self, key: &str) -> Result<Option<Vec<i64>>, GgufError> {
        let Some(Value::Array(items)) = self.get(key) else {
            return self.get_array(key, "an array of integers", |_| None);
        };
        if let Some((index, big)) = items.iter().enumerate().find_map(|(i, item)| match item {
            Value::U64(v) if *v > i64::MAX as u64 => Some((i, *v)),
            _ => None,
        }) {
            return Err(self.error(format!("element {index} of metadata key '{key}' is {big}, which does not fit an i64")));
        }
        self.get_array(key, "an array of integers", Value::as_i64)
    }

    /// An array whose every element `convert` accepts; None when the key is absent.
    fn get_array<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        convert: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<Vec<T>>, GgufError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let Value::Array(items) = value else { return Err(self.wrong_type(key, value, expected)) };
        match items.iter().map(convert).collect::<Option<Vec<T>>>() {
            Some(converted) => Ok(Some(converted)),
            None => Err(self.wrong_type(key, value, expected)),
        }
    }
}
