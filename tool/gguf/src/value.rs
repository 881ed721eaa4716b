//! Metadata values: the thirteen GGUF value types and how each is encoded.

use crate::reader::ByteCursor;

/// Arrays may hold arrays (the spec allows it); deeper nesting than this is refused so a
/// crafted file cannot recurse without bound.
pub const MAX_ARRAY_NESTING: usize = 8;

/// One metadata value. Integers and floats keep their stored width; strings are UTF-8.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Elements share one type (the file states it once per array); empty arrays keep no type.
    Array(Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    /// The type's name for messages, as llama.cpp's `gguf_type_name` spells it (`"u32"`,
    /// `"str"`, `"arr"`).
    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }

    /// The type for messages, arrays with their element type: `"arr[str]"`, `"arr[arr[i32]]"`.
    pub fn describe_type(&self) -> String {
        match self {
            Value::Array(items) => match items.first() {
                Some(first) => format!("arr[{}]", first.describe_type()),
                None => "arr (empty)".to_string(),
            },
            other => other.type_name().to_string(),
        }
    }

    /// The value as an unsigned integer: any integer type holding a value >= 0.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer: any integer type whose value fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float: F32, F64, or any integer (64-bit ones rounded to nearest).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }

    fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }
}

/// A value type as the file encodes it (u32 ids 0..=12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "str",
            Array => "arr",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type takes in the file: bounds array lengths
    /// before their elements are allocated.
    fn min_encoded_size(self) -> usize {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 => 8,
            String => 8,     // the length
            Array => 4 + 8, // element type and length
        }
    }
}

/// Reads a value type id.
pub(crate) fn read_value_type(cursor: &mut ByteCursor<'_>, what: &str) -> Result<ValueType, String> {
    let at = cursor.position();
    let id = cursor.u32(what)?;
    ValueType::from_id(id).ok_or_else(|| format!("{what} at byte {at} is {id}, which is not a GGUF value type (0..=12)"))
}

/// Reads one value of type `ty`; `depth` counts the arrays around it.
pub(crate) fn read_value(cursor: &mut ByteCursor<'_>, ty: ValueType, depth: usize) -> Result<Value, String> {
    Ok(match ty {
        ValueType::U8 => Value::U8(cursor.u8("a u8 value")?),
        ValueType::I8 => Value::I8(cursor.i8("an i8 value")?),
        ValueType::U16 => Value::U16(cursor.u16("a u16 value")?),
        ValueType::I16 => Value::I16(cursor.i16("an i16 value")?),
        ValueType::U32 => Value::U32(cursor.u32("a u32 value")?),
        ValueType::I32 => Value::I32(cursor.i32("an i32 value")?),
        ValueType::F32 => Value::F32(cursor.f32("an f32 value")?),
        ValueType::U64 => Value::U64(cursor.u64("a u64 value")?),
        ValueType::I64 => Value::I64(cursor.i64("an i64 value")?),
        ValueType::F64 => Value::F64(cursor.f64("an f64 value")?),
        ValueType::Bool => {
            let at = cursor.position();
            // The spec: 0 is false, 1 is true, anything else makes the file invalid.
            match cursor.u8("a bool value")? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return Err(format!("bool value at byte {at} is {other}, not 0 or 1")),
            }
        }
        ValueType::String => Value::String(cursor.string("a string value")?),
        ValueType::Array => read_array(cursor, depth)?,
    })
}

fn read_array(cursor: &mut ByteCursor<'_>, depth: usize) -> Result<Value, String> {
    if depth >= MAX_ARRAY_NESTING {
        return Err(format!("arrays nest deeper than {MAX_ARRAY_NESTING} levels at byte {}", cursor.position()));
    }
    let element_type = read_value_type(cursor, "an array's element type")?;
    let count = cursor.u64("an array's length")?;
    let count = cursor.check_count(
        count,
        element_type.min_encoded_size(),
        &format!("the length of an array of {}", element_type.name()),
    )?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(read_value(cursor, element_type, depth + 1)?);
    }
    Ok(Value::Array(items))
}
