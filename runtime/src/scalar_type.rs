//! ExecuTorch's ScalarType codes (schema/scalar_type.fbs) and element sizes.

use core::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ScalarType {
    Byte = 0,
    Char = 1,
    Short = 2,
    Int = 3,
    Long = 4,
    Half = 5,
    Float = 6,
    Double = 7,
    ComplexHalf = 8,
    ComplexFloat = 9,
    ComplexDouble = 10,
    Bool = 11,
    QInt8 = 12,
    QUInt8 = 13,
    QInt32 = 14,
    BFloat16 = 15,
    QUInt4x2 = 16,
    QUInt2x4 = 17,
    Bits1x8 = 18,
    Bits2x4 = 19,
    Bits4x2 = 20,
    Bits8 = 21,
    Bits16 = 22,
    Float8e5m2 = 23,
    Float8e4m3fn = 24,
    Float8e5m2fnuz = 25,
    Float8e4m3fnuz = 26,
    UInt16 = 27,
    UInt32 = 28,
    UInt64 = 29,
}

impl ScalarType {
    pub fn from_code(code: i64) -> Option<ScalarType> {
        use ScalarType::*;
        const ALL: [ScalarType; 30] = [
            Byte, Char, Short, Int, Long, Half, Float, Double, ComplexHalf, ComplexFloat,
            ComplexDouble, Bool, QInt8, QUInt8, QInt32, BFloat16, QUInt4x2, QUInt2x4, Bits1x8,
            Bits2x4, Bits4x2, Bits8, Bits16, Float8e5m2, Float8e4m3fn, Float8e5m2fnuz,
            Float8e4m3fnuz, UInt16, UInt32, UInt64,
        ];
        usize::try_from(code).ok().and_then(|i| ALL.get(i).copied())
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        use ScalarType::*;
        match self {
            Byte | Char | Bool | QInt8 | QUInt8 | QUInt4x2 | QUInt2x4 | Bits1x8 | Bits2x4
            | Bits4x2 | Bits8 | Float8e5m2 | Float8e4m3fn | Float8e5m2fnuz | Float8e4m3fnuz => 1,
            Short | Half | BFloat16 | Bits16 | UInt16 => 2,
            Int | Float | QInt32 | UInt32 | ComplexHalf => 4,
            Long | Double | ComplexFloat | UInt64 => 8,
            ComplexDouble => 16,
        }
    }

    pub fn is_floating(self) -> bool {
        matches!(self, ScalarType::Half | ScalarType::Float | ScalarType::Double | ScalarType::BFloat16)
    }

    pub fn is_integral(self, include_bool: bool) -> bool {
        use ScalarType::*;
        matches!(self, Byte | Char | Short | Int | Long | UInt16 | UInt32 | UInt64)
            || (include_bool && self == Bool)
    }

    /// Name as PyTorch/safetensors spell it.
    pub fn name(self) -> &'static str {
        use ScalarType::*;
        match self {
            Byte => "uint8",
            Char => "int8",
            Short => "int16",
            Int => "int32",
            Long => "int64",
            Half => "float16",
            Float => "float32",
            Double => "float64",
            ComplexHalf => "complex32",
            ComplexFloat => "complex64",
            ComplexDouble => "complex128",
            Bool => "bool",
            QInt8 => "qint8",
            QUInt8 => "quint8",
            QInt32 => "qint32",
            BFloat16 => "bfloat16",
            QUInt4x2 => "quint4x2",
            QUInt2x4 => "quint2x4",
            Bits1x8 => "bits1x8",
            Bits2x4 => "bits2x4",
            Bits4x2 => "bits4x2",
            Bits8 => "bits8",
            Bits16 => "bits16",
            Float8e5m2 => "float8_e5m2",
            Float8e4m3fn => "float8_e4m3fn",
            Float8e5m2fnuz => "float8_e5m2fnuz",
            Float8e4m3fnuz => "float8_e4m3fnuz",
            UInt16 => "uint16",
            UInt32 => "uint32",
            UInt64 => "uint64",
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
