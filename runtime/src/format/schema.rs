//! The `.pte` schema (schema/program.fbs, namespace `executorch_flatbuffer`) as Rust types.
//!
//! Decoding borrows strings and byte blobs from the file (no payload is copied); encoding
//! writes the same structures back. Field slots follow declaration order; a union takes two
//! slots (type byte, then value). Optional vectors/strings/tables stay `Option` so that
//! absent and empty survive a round trip.

use alloc::vec::Vec;

use super::error::FormatErrorKind as K;
use super::flatbuf::{self, Builder, DecodeResult as Result, Table};

/// A table type: decoded from a [`Table`], encoded into a [`Builder`].
pub trait FbTable<'a>: Sized {
    const NAME: &'static str;
    fn decode(t: Table<'a, '_>) -> Result<Self>;
    fn encode(&self, b: &mut Builder) -> usize;
}

/// A field kind: how to read it from slot `slot` and how to write it.
pub trait FbField<'a>: Sized {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self>;
    /// Builds out-of-line data (strings, vectors, sub-tables) before the table starts.
    fn prepare(&self, b: &mut Builder) -> Option<usize>;
    fn add(&self, prepared: Option<usize>, b: &mut Builder, slot: usize);
}

macro_rules! scalar_field {
    ($($t:ty),*) => {$(
        impl<'a> FbField<'a> for $t {
            fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
                Ok(<$t as VecScalar>::from_bits(t.scalar(slot, core::mem::size_of::<$t>())?))
            }
            fn prepare(&self, _: &mut Builder) -> Option<usize> { None }
            fn add(&self, _: Option<usize>, b: &mut Builder, slot: usize) {
                if *self != <$t>::default() { b.add_scalar(slot, &self.to_le_bytes()) }
            }
        }
    )*};
}
scalar_field!(i8, u8, i32, u32, i64, u64, f64);

impl<'a> FbField<'a> for bool {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
        Ok(t.scalar(slot, 1)? != 0)
    }
    fn prepare(&self, _: &mut Builder) -> Option<usize> {
        None
    }
    fn add(&self, _: Option<usize>, b: &mut Builder, slot: usize) {
        if *self {
            b.add_scalar(slot, &[1])
        }
    }
}

impl<'a> FbField<'a> for Option<&'a str> {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
        t.offset(slot)?.map(|p| flatbuf::string(&t.r, p, t.ctx)).transpose()
    }
    fn prepare(&self, b: &mut Builder) -> Option<usize> {
        self.map(|s| b.create_string(s))
    }
    fn add(&self, p: Option<usize>, b: &mut Builder, slot: usize) {
        if let Some(p) = p {
            b.add_offset(slot, p)
        }
    }
}

/// `[ubyte]` vectors: tensor dim orders, blobs (written 16-aligned, as `force_align: 16`).
impl<'a> FbField<'a> for Option<&'a [u8]> {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
        t.scalar_vector(slot, 1)
    }
    fn prepare(&self, b: &mut Builder) -> Option<usize> {
        self.map(|s| b.create_bytes(s))
    }
    fn add(&self, p: Option<usize>, b: &mut Builder, slot: usize) {
        if let Some(p) = p {
            b.add_offset(slot, p)
        }
    }
}

/// Scalars that appear in vectors.
pub trait VecScalar: Copy {
    const SIZE: usize;
    /// From the zero-extended little-endian bits.
    fn from_bits(v: u64) -> Self;
    fn to_le(self) -> [u8; 8];
}

macro_rules! vec_scalar {
    ($($t:ty),*) => {$(
        impl VecScalar for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn from_bits(v: u64) -> Self {
                <$t>::from_le_bytes(v.to_le_bytes()[..Self::SIZE].try_into().unwrap_or_default())
            }
            fn to_le(self) -> [u8; 8] {
                let mut a = [0u8; 8];
                a[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
                a
            }
        }
    )*};
}
vec_scalar!(i8, u8, i32, u32, i64, u64, f64);

impl VecScalar for bool {
    const SIZE: usize = 1;
    fn from_bits(v: u64) -> Self {
        v != 0
    }
    fn to_le(self) -> [u8; 8] {
        [self as u8, 0, 0, 0, 0, 0, 0, 0]
    }
}

/// Little-endian bytes (at most 8) as zero-extended bits.
fn le_bits(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64)
}

macro_rules! scalar_vec_field {
    ($($t:ty),*) => {$(
        impl<'a> FbField<'a> for Option<Vec<$t>> {
            fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
                let size = <$t as VecScalar>::SIZE;
                Ok(t.scalar_vector(slot, size)?.map(|bytes| {
                    bytes.chunks_exact(size).map(|b| <$t as VecScalar>::from_bits(le_bits(b))).collect()
                }))
            }
            fn prepare(&self, b: &mut Builder) -> Option<usize> {
                self.as_ref().map(|v| {
                    let size = <$t as VecScalar>::SIZE;
                    let les: Vec<[u8; 8]> = v.iter().map(|x| VecScalar::to_le(*x)).collect();
                    let items: Vec<&[u8]> = les.iter().map(|a| &a[..size]).collect();
                    b.create_scalars(&items, size)
                })
            }
            fn add(&self, p: Option<usize>, b: &mut Builder, slot: usize) {
                if let Some(p) = p {
                    b.add_offset(slot, p)
                }
            }
        }
    )*};
}
scalar_vec_field!(i32, i64, u64, f64, bool);

impl<'a, T: FbTable<'a>> FbField<'a> for Option<T> {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
        match t.offset(slot)? {
            Some(p) => Ok(Some(T::decode(t.r.table(p, T::NAME)?)?)),
            None => Ok(None),
        }
    }
    fn prepare(&self, b: &mut Builder) -> Option<usize> {
        self.as_ref().map(|x| x.encode(b))
    }
    fn add(&self, p: Option<usize>, b: &mut Builder, slot: usize) {
        if let Some(p) = p {
            b.add_offset(slot, p)
        }
    }
}

impl<'a, T: FbTable<'a>> FbField<'a> for Option<Vec<T>> {
    fn read(t: &Table<'a, '_>, slot: usize) -> Result<Self> {
        match t.offset(slot)? {
            Some(p) => {
                let (start, len) = flatbuf::vector(&t.r, p, 4, t.ctx)?;
                let mut v = Vec::with_capacity(len);
                for i in 0..len {
                    v.push(T::decode(t.r.table_at(start + 4 * i, T::NAME)?)?);
                }
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }
    fn prepare(&self, b: &mut Builder) -> Option<usize> {
        self.as_ref().map(|v| {
            let offs: Vec<usize> = v.iter().map(|x| x.encode(b)).collect();
            b.create_offsets(&offs)
        })
    }
    fn add(&self, p: Option<usize>, b: &mut Builder, slot: usize) {
        if let Some(p) = p {
            b.add_offset(slot, p)
        }
    }
}

macro_rules! fb_table {
    ($(#[$m:meta])* $name:ident $(<$lt:lifetime>)? { $($slot:literal $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name $(<$lt>)? { $(pub $field: $ty),* }

        impl<'a> FbTable<'a> for $name $(<$lt>)? {
            const NAME: &'static str = stringify!($name);
            #[allow(unused_variables, unused_mut)]
            fn decode(t: Table<'a, '_>) -> Result<Self> {
                let mut t = t;
                Ok($name { $($field: {
                    t.ctx = concat!(stringify!($name), ".", stringify!($field));
                    <$ty as FbField<'a>>::read(&t, $slot)?
                }),* })
            }
            #[allow(unused_variables)]
            fn encode(&self, b: &mut Builder) -> usize {
                $(let $field = FbField::prepare(&self.$field, b);)*
                b.start_table();
                $(FbField::add(&self.$field, $field, b, $slot);)*
                b.end_table()
            }
        }
    };
}

fb_table!(
    /// The root table.
    Program<'a> {
        0 version: u32,
        1 execution_plan: Option<Vec<ExecutionPlan<'a>>>,
        2 constant_buffer: Option<Vec<Buffer<'a>>>,
        3 backend_delegate_data: Option<Vec<BackendDelegateInlineData<'a>>>,
        4 segments: Option<Vec<DataSegment>>,
        5 constant_segment: Option<SubsegmentOffsets>,
        6 mutable_data_segments: Option<Vec<SubsegmentOffsets>>,
        7 named_data: Option<Vec<NamedData<'a>>>,
    }
);

fb_table!(
    /// One method.
    ExecutionPlan<'a> {
        0 name: Option<&'a str>,
        1 container_meta_type: Option<ContainerMetadata<'a>>,
        2 values: Option<Vec<EValue<'a>>>,
        3 inputs: Option<Vec<i32>>,
        4 outputs: Option<Vec<i32>>,
        5 chains: Option<Vec<Chain<'a>>>,
        6 operators: Option<Vec<Operator<'a>>>,
        7 delegates: Option<Vec<BackendDelegate<'a>>>,
        8 non_const_buffer_sizes: Option<Vec<i64>>,
        9 non_const_buffer_device: Option<Vec<NonConstBufferDevice>>,
    }
);

fb_table!(ContainerMetadata<'a> { 0 encoded_inp_str: Option<&'a str>, 1 encoded_out_str: Option<&'a str> });

fb_table!(Chain<'a> {
    0 inputs: Option<Vec<i32>>,
    1 outputs: Option<Vec<i32>>,
    2 instructions: Option<Vec<Instruction>>,
    3 stacktrace: Option<Vec<FrameList<'a>>>,
});

fb_table!(KernelCall { 0 op_index: i32, 1 args: Option<Vec<i32>> });
fb_table!(DelegateCall { 0 delegate_index: i32, 1 args: Option<Vec<i32>> });
fb_table!(MoveCall { 0 move_from: i32, 1 move_to: i32 });
fb_table!(JumpFalseCall { 0 cond_value_index: i32, 1 destination_instruction: i32 });
fb_table!(FreeCall { 0 value_index: i32 });
fb_table!(Operator<'a> { 0 name: Option<&'a str>, 1 overload: Option<&'a str> });
fb_table!(Null {});
fb_table!(Int { 0 int_val: i64 });
fb_table!(Bool { 0 bool_val: bool });
fb_table!(Double { 0 double_val: f64 });
fb_table!(StringValue<'a> { 0 string_val: Option<&'a str> });
// IntList items are EValue indices (boxed ints), not literal values.
fb_table!(IntList { 0 items: Option<Vec<i64>> });
fb_table!(DoubleList { 0 items: Option<Vec<f64>> });
fb_table!(BoolList { 0 items: Option<Vec<bool>> });
fb_table!(TensorList { 0 items: Option<Vec<i32>> });
// OptionalTensorList items are EValue indices; -1 is None.
fb_table!(OptionalTensorList { 0 items: Option<Vec<i32>> });

fb_table!(Tensor<'a> {
    0 scalar_type: i8,
    1 storage_offset: i32,
    2 sizes: Option<Vec<i32>>,
    3 dim_order: Option<&'a [u8]>,
    4 requires_grad: bool,
    5 data_buffer_idx: u32,
    6 allocation_info: Option<AllocationDetails>,
    7 layout: i8,
    8 shape_dynamism: i8,
    9 extra_tensor_info: Option<ExtraTensorInfo<'a>>,
});

fb_table!(AllocationDetails { 0 memory_id: u32, 1 memory_offset_low: u32, 2 memory_offset_high: u32 });
fb_table!(ExtraTensorInfo<'a> {
    0 mutable_data_segments_idx: u64,
    1 fully_qualified_name: Option<&'a str>,
    2 location: i8,
    3 device_type: i8,
    4 device_index: i8,
});
fb_table!(NonConstBufferDevice { 0 buffer_idx: i32, 1 device_type: i8, 2 device_index: i8 });
fb_table!(BackendDelegate<'a> {
    0 id: Option<&'a str>,
    1 processed: Option<BackendDelegateDataReference>,
    2 compile_specs: Option<Vec<CompileSpec<'a>>>,
});
fb_table!(BackendDelegateDataReference { 0 location: i8, 1 index: u32 });
fb_table!(CompileSpec<'a> { 0 key: Option<&'a str>, 1 value: Option<&'a [u8]> });
fb_table!(Frame<'a> {
    0 filename: Option<&'a str>,
    1 lineno: i32,
    2 name: Option<&'a str>,
    3 context: Option<&'a str>,
});
fb_table!(FrameList<'a> { 0 items: Option<Vec<Frame<'a>>> });
fb_table!(Buffer<'a> { 0 storage: Option<&'a [u8]> });
fb_table!(BackendDelegateInlineData<'a> { 0 data: Option<&'a [u8]> });
fb_table!(DataSegment { 0 offset: u64, 1 size: u64 });
fb_table!(SubsegmentOffsets { 0 segment_index: u32, 1 offsets: Option<Vec<u64>> });
fb_table!(NamedData<'a> { 0 key: Option<&'a str>, 1 segment_index: u32 });

impl AllocationDetails {
    pub fn offset(&self) -> u64 {
        ((self.memory_offset_high as u64) << 32) | self.memory_offset_low as u64
    }
}

impl Operator<'_> {
    /// Registry key: `name.overload`, or `name` for an empty overload.
    pub fn key(&self) -> alloc::string::String {
        crate::kernel::op_key(self.name.unwrap_or(""), self.overload.unwrap_or(""))
    }
}

/// Reads a union: type byte at `slot`, value table at `slot + 1`.
fn union_table<'a, T: FbTable<'a>>(t: &Table<'a, '_>, slot: usize) -> Result<T> {
    match t.offset(slot + 1)? {
        Some(p) => T::decode(t.r.table(p, T::NAME)?),
        None => Err(t.r.fail(K::InvalidValue("union tag set but value missing"), t.pos, t.ctx)),
    }
}

fn encode_union(b: &mut Builder, slot: usize, tag: u8, value: Option<usize>) -> usize {
    b.start_table();
    if tag != 0 {
        b.add_scalar(slot, &[tag]);
    }
    if let Some(v) = value {
        b.add_offset(slot + 1, v);
    }
    b.end_table()
}

/// InstructionArguments union.
#[derive(Clone, Debug, PartialEq)]
pub enum InstructionArguments {
    KernelCall(KernelCall),
    DelegateCall(DelegateCall),
    MoveCall(MoveCall),
    JumpFalseCall(JumpFalseCall),
    FreeCall(FreeCall),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Instruction {
    pub instr_args: Option<InstructionArguments>,
}

impl<'a> FbTable<'a> for Instruction {
    const NAME: &'static str = "Instruction";
    fn decode(t: Table<'a, '_>) -> Result<Self> {
        let tag = u8::read(&t, 0)?;
        use InstructionArguments as I;
        let instr_args = match tag {
            0 => None,
            1 => Some(I::KernelCall(union_table(&t, 0)?)),
            2 => Some(I::DelegateCall(union_table(&t, 0)?)),
            3 => Some(I::MoveCall(union_table(&t, 0)?)),
            4 => Some(I::JumpFalseCall(union_table(&t, 0)?)),
            5 => Some(I::FreeCall(union_table(&t, 0)?)),
            _ => return Err(t.r.fail(K::InvalidValue("unknown InstructionArguments type"), t.pos, "Instruction")),
        };
        Ok(Instruction { instr_args })
    }
    fn encode(&self, b: &mut Builder) -> usize {
        use InstructionArguments as I;
        let (tag, v) = match &self.instr_args {
            None => (0, None),
            Some(I::KernelCall(x)) => (1, Some(x.encode(b))),
            Some(I::DelegateCall(x)) => (2, Some(x.encode(b))),
            Some(I::MoveCall(x)) => (3, Some(x.encode(b))),
            Some(I::JumpFalseCall(x)) => (4, Some(x.encode(b))),
            Some(I::FreeCall(x)) => (5, Some(x.encode(b))),
        };
        encode_union(b, 0, tag, v)
    }
}

/// KernelTypes union.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelTypes<'a> {
    Null,
    Int(Int),
    Bool(Bool),
    Double(Double),
    Tensor(Tensor<'a>),
    String(StringValue<'a>),
    IntList(IntList),
    DoubleList(DoubleList),
    BoolList(BoolList),
    TensorList(TensorList),
    OptionalTensorList(OptionalTensorList),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct EValue<'a> {
    pub val: Option<KernelTypes<'a>>,
}

impl<'a> FbTable<'a> for EValue<'a> {
    const NAME: &'static str = "EValue";
    fn decode(t: Table<'a, '_>) -> Result<Self> {
        let tag = u8::read(&t, 0)?;
        use KernelTypes as V;
        let val = match tag {
            0 => None,
            1 => {
                // Null carries an (empty) table; tolerate its absence.
                if t.offset(1)?.is_some() {
                    let _: Null = union_table(&t, 0)?;
                }
                Some(V::Null)
            }
            2 => Some(V::Int(union_table(&t, 0)?)),
            3 => Some(V::Bool(union_table(&t, 0)?)),
            4 => Some(V::Double(union_table(&t, 0)?)),
            5 => Some(V::Tensor(union_table(&t, 0)?)),
            6 => Some(V::String(union_table(&t, 0)?)),
            7 => Some(V::IntList(union_table(&t, 0)?)),
            8 => Some(V::DoubleList(union_table(&t, 0)?)),
            9 => Some(V::BoolList(union_table(&t, 0)?)),
            10 => Some(V::TensorList(union_table(&t, 0)?)),
            11 => Some(V::OptionalTensorList(union_table(&t, 0)?)),
            _ => return Err(t.r.fail(K::InvalidValue("unknown KernelTypes type"), t.pos, "EValue")),
        };
        Ok(EValue { val })
    }
    fn encode(&self, b: &mut Builder) -> usize {
        use KernelTypes as V;
        let (tag, v) = match &self.val {
            None => (0, None),
            Some(V::Null) => (1, Some(Null {}.encode(b))),
            Some(V::Int(x)) => (2, Some(x.encode(b))),
            Some(V::Bool(x)) => (3, Some(x.encode(b))),
            Some(V::Double(x)) => (4, Some(x.encode(b))),
            Some(V::Tensor(x)) => (5, Some(x.encode(b))),
            Some(V::String(x)) => (6, Some(x.encode(b))),
            Some(V::IntList(x)) => (7, Some(x.encode(b))),
            Some(V::DoubleList(x)) => (8, Some(x.encode(b))),
            Some(V::BoolList(x)) => (9, Some(x.encode(b))),
            Some(V::TensorList(x)) => (10, Some(x.encode(b))),
            Some(V::OptionalTensorList(x)) => (11, Some(x.encode(b))),
        };
        encode_union(b, 0, tag, v)
    }
}
