//! The executor's value table entries (ExecuTorch's EValue).

use alloc::string::String;
use alloc::vec::Vec;

use crate::tensor::TensorImpl;

#[derive(Clone, Debug)]
pub enum Value {
    None,
    Int(i64),
    Bool(bool),
    Double(f64),
    String(String),
    /// Indices of Int values (boxed so that symbolic ints stay live).
    IntList(Vec<u32>),
    DoubleList(Vec<f64>),
    BoolList(Vec<bool>),
    Tensor(TensorImpl),
    /// Indices of Tensor values.
    TensorList(Vec<u32>),
    /// Indices of Tensor values; None for absent entries.
    OptionalTensorList(Vec<Option<u32>>),
}

impl Value {
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Int(_) => "Int",
            Value::Bool(_) => "Bool",
            Value::Double(_) => "Double",
            Value::String(_) => "String",
            Value::IntList(_) => "IntList",
            Value::DoubleList(_) => "DoubleList",
            Value::BoolList(_) => "BoolList",
            Value::Tensor(_) => "Tensor",
            Value::TensorList(_) => "TensorList",
            Value::OptionalTensorList(_) => "OptionalTensorList",
        }
    }

    pub fn as_tensor(&self) -> Option<&TensorImpl> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// A PyTorch `Scalar` argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Double(f64),
}

impl Scalar {
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Double(d) => d,
        }
    }
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Double(d) => d as i64,
        }
    }
    pub fn is_floating(self) -> bool {
        matches!(self, Scalar::Double(_))
    }
}
