//! Executor behaviour on programs built with our own writer: planned memory, constants,
//! dynamic shapes, control flow, getter methods, missing kernels reported together.

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::format::schema::*;
use rbuild_runtime::format::write_pte;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{KernelEntry, KernelRegistry, LoadError, ScalarType, Value};

/// out = a + b (f32, same shape), resizing out to a's shape.
fn add_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    let mut out = args.out(2)?;
    out.resize(a.sizes())?;
    let (a, b) = (a.data::<f32>()?, b.data::<f32>()?);
    for (o, (x, y)) in out.data_mut::<f32>()?.iter_mut().zip(a.iter().zip(b.iter().cycle())) {
        *o = x + y;
    }
    Ok(())
}

fn registry() -> KernelRegistry {
    let mut r = KernelRegistry::new();
    r.register(&[KernelEntry { op: "test::add.out", kernel: add_out }]);
    r
}

fn tensor<'a>(sizes: &[i32], dynamic: bool, data_buffer_idx: u32, planned_offset: Option<u32>) -> EValue<'a> {
    static DIM_ORDER: [u8; 1] = [0];
    EValue {
        val: Some(KernelTypes::Tensor(Tensor {
            scalar_type: ScalarType::Float.code() as i8,
            sizes: Some(sizes.to_vec()),
            dim_order: Some(&DIM_ORDER[..sizes.len()]),
            data_buffer_idx,
            allocation_info: planned_offset.map(|o| AllocationDetails { memory_id: 1, memory_offset_low: o, memory_offset_high: 0 }),
            shape_dynamism: dynamic as i8,
            ..Default::default()
        })),
    }
}

fn kernel_call(op_index: i32, args: &[i32]) -> Instruction {
    Instruction { instr_args: Some(InstructionArguments::KernelCall(KernelCall { op_index, args: Some(args.to_vec()) })) }
}

fn plan<'a>(name: &'a str, values: Vec<EValue<'a>>, inputs: &[i32], outputs: &[i32], instrs: Vec<Instruction>, ops: &[&'a str]) -> ExecutionPlan<'a> {
    ExecutionPlan {
        name: Some(name),
        values: Some(values),
        inputs: Some(inputs.to_vec()),
        outputs: Some(outputs.to_vec()),
        chains: Some(vec![Chain { instructions: Some(instrs), ..Default::default() }]),
        operators: Some(ops.iter().map(|n| Operator { name: Some(n), overload: Some("out") }).collect()),
        delegates: Some(vec![]),
        non_const_buffer_sizes: Some(vec![0, 64]),
        ..Default::default()
    }
}

fn program_bytes() -> Vec<u8> {
    let int = |v: i64| EValue { val: Some(KernelTypes::Int(Int { int_val: v })) };
    let boolean = |v: bool| EValue { val: Some(KernelTypes::Bool(Bool { bool_val: v })) };
    // forward(x: f32[<=4] dynamic) = (x + c) + c when flag is true; c = [10, 20, 30, 40] constant.
    let forward = plan(
        "forward",
        vec![tensor(&[4], true, 0, Some(0)), tensor(&[4], false, 1, None), tensor(&[4], true, 0, Some(16)), boolean(false), tensor(&[4], true, 0, Some(32))],
        &[0],
        &[4],
        vec![
            kernel_call(0, &[0, 1, 2, 2]),
            // flag (value 3) is false: skip the second add, move value 2 to the output instead.
            Instruction { instr_args: Some(InstructionArguments::JumpFalseCall(JumpFalseCall { cond_value_index: 3, destination_instruction: 3 })) },
            kernel_call(0, &[2, 1, 4, 4]),
            Instruction { instr_args: Some(InstructionArguments::MoveCall(MoveCall { move_from: 2, move_to: 4 })) },
        ],
        &["test::add"],
    );
    let missing = plan(
        "missing",
        vec![tensor(&[4], false, 0, Some(0)), tensor(&[4], false, 0, Some(16))],
        &[0],
        &[1],
        vec![kernel_call(0, &[0, 0, 1, 1]), kernel_call(1, &[0, 0, 1, 1]), kernel_call(2, &[0, 0, 1, 1])],
        &["nope::first", "test::add", "nope::second"],
    );
    let mut getter = plan("get_max_seq_len", vec![int(128)], &[], &[0], vec![], &[]);
    getter.non_const_buffer_sizes = Some(vec![0]);
    let consts: Vec<u8> = [10f32, 20., 30., 40.].iter().flat_map(|v| v.to_le_bytes()).collect();
    let program = Program {
        execution_plan: Some(vec![forward, missing, getter]),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0, 0]) }),
        ..Default::default()
    };
    write_pte(&program, &[&consts])
}

fn aligned(bytes: &[u8]) -> rbuild_runtime::buffer::AlignedBuf {
    rbuild_runtime::buffer::AlignedBuf::from_bytes(bytes)
}

#[test]
fn runs_with_constants_dynamic_shapes_and_control_flow() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    assert_eq!(program.method_names(), ["forward", "missing", "get_max_seq_len"]);
    let mut m = program.load_method("forward", &registry(), &BackendRegistry::new()).unwrap();
    let x: Vec<u8> = [1f32, 2., 3.].iter().flat_map(|v| v.to_le_bytes()).collect();
    // Dynamic bound [4]: a shorter input is accepted, a longer one is not.
    let too_long = vec![0u8; 5 * 4];
    assert!(m.set_input_tensor(0, ScalarType::Float, &[5], &too_long).is_err());
    assert!(m.set_input_tensor(0, ScalarType::Long, &[3], &[0; 24]).is_err());
    m.set_input_tensor(0, ScalarType::Float, &[3], &x).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    let Some(Value::Tensor(t)) = m.output_value(0) else { panic!("output is not a tensor") };
    assert_eq!(t.shape.as_slice(), [3]);
    let out: Vec<f32> = m.output_bytes(0).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    // The jump skipped the second add: x + c once.
    assert_eq!(out, [11., 22., 33.]);
}

#[test]
fn execute_requires_inputs() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &registry(), &BackendRegistry::new()).unwrap();
    let e = m.execute(&mut KernelContext::default()).unwrap_err();
    assert!(e.to_string().contains("input 0 was not set"), "{e}");
}

/// Input metadata read without loading equals what a loaded method reports, and needs no
/// kernels: the missing-kernel method still describes its inputs.
#[test]
fn input_metadata_without_loading() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let m = program.load_method("forward", &registry(), &BackendRegistry::new()).unwrap();
    let loaded: Vec<_> = (0..m.inputs().len())
        .map(|i| match m.input_value(i) {
            Some(Value::Tensor(t)) => Some((t.dtype, t.shape.as_slice().to_vec())),
            _ => None,
        })
        .collect();
    assert!(!loaded.is_empty());
    assert_eq!(program.input_tensor_metas("forward").unwrap(), loaded);
    program.input_tensor_metas("missing").unwrap();
    assert!(program.input_tensor_metas("nonexistent").is_err());
}

#[test]
fn all_missing_kernels_are_reported_at_load() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    match program.load_method("missing", &registry(), &BackendRegistry::new()) {
        Err(LoadError::MissingOperators { ops, .. }) => assert_eq!(ops, ["nope::first.out", "nope::second.out"]),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("loaded a method with missing kernels"),
    }
    let e = program.load_method("nonexistent", &registry(), &BackendRegistry::new()).err().unwrap();
    assert!(e.to_string().contains("get_max_seq_len"), "{e}");
}

#[test]
fn getter_methods_return_their_values() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("get_max_seq_len", &registry(), &BackendRegistry::new()).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    assert!(matches!(m.output_value(0), Some(Value::Int(128))));
}

#[test]
fn writer_output_is_deterministic() {
    assert_eq!(program_bytes(), program_bytes());
}

/// A backend whose blob is one f32 added to every input element.
struct AddBlobBackend;

struct AddBlobHandle(f32);

impl rbuild_runtime::backend::Backend for AddBlobBackend {
    fn id(&self) -> &str {
        "AddBlobBackend"
    }
    fn init(
        &self,
        _: &rbuild_runtime::backend::BackendInitContext<'_>,
        processed: &[u8],
        specs: &[rbuild_runtime::backend::CompileSpec<'_>],
    ) -> Result<Box<dyn rbuild_runtime::backend::DelegateHandle>, String> {
        assert_eq!(specs.len(), 1);
        assert_eq!((specs[0].key, specs[0].value), ("mode", &b"add"[..]));
        let v: [u8; 4] = processed.try_into().map_err(|_| "blob must be 4 bytes".to_string())?;
        Ok(Box::new(AddBlobHandle(f32::from_le_bytes(v))))
    }
}

impl rbuild_runtime::backend::DelegateHandle for AddBlobHandle {
    fn execute(&mut self, _: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let x = args.tensor(0)?;
        let mut out = args.out(1)?;
        out.resize(x.sizes())?;
        for (o, v) in out.data_mut::<f32>()?.iter_mut().zip(x.data::<f32>()?) {
            *o = v + self.0;
        }
        Ok(())
    }
}

#[test]
fn delegate_calls_reach_their_backend() {
    let blob = 2.5f32.to_le_bytes();
    let mut forward = plan(
        "forward",
        vec![tensor(&[3], false, 0, Some(0)), tensor(&[3], false, 0, Some(16))],
        &[0],
        &[1],
        vec![Instruction { instr_args: Some(InstructionArguments::DelegateCall(DelegateCall { delegate_index: 0, args: Some(vec![0, 1]) })) }],
        &[],
    );
    forward.delegates = Some(vec![BackendDelegate {
        id: Some("AddBlobBackend"),
        processed: Some(BackendDelegateDataReference { location: 1, index: 0 }),
        compile_specs: Some(vec![CompileSpec { key: Some("mode"), value: Some(b"add") }]),
    }]);
    let program = Program { execution_plan: Some(vec![forward]), ..Default::default() };
    let buf = aligned(&write_pte(&program, &[&blob]));
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    // Without the backend registered, loading names it.
    let e = program.load_method("forward", &registry(), &BackendRegistry::new()).err().unwrap();
    assert!(matches!(&e, LoadError::BackendNotAvailable { id, .. } if id == "AddBlobBackend"), "{e}");
    let mut backends = BackendRegistry::new();
    backends.register(Box::new(AddBlobBackend));
    let mut m = program.load_method("forward", &registry(), &backends).unwrap();
    let x: Vec<u8> = [1f32, 2., 3.].iter().flat_map(|v| v.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Float, &[3], &x).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    let out: Vec<f32> = m.output_bytes(0).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(out, [3.5, 4.5, 5.5]);
}

#[test]
fn planned_arenas_can_live_in_caller_placed_memory() {
    let buf = aligned(&program_bytes());
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    assert_eq!(program.planned_arena_sizes("forward").unwrap(), [64]);
    let x: Vec<u8> = [1f32, 2., 3., 4.].iter().flat_map(|v| v.to_le_bytes()).collect();
    // A u128-backed block: aligned as the runtime requires; 16 spare bytes must stay untouched.
    let mut memory = [u128::MAX; 5];
    {
        let bytes: &mut [u8] = bytemuck_bytes(&mut memory);
        let mut m = program.load_method_in("forward", &registry(), &BackendRegistry::new(), vec![&mut bytes[..64]]).unwrap();
        m.set_input_tensor(0, ScalarType::Float, &[4], &x).unwrap();
        m.execute(&mut KernelContext::default()).unwrap();
        let out: Vec<f32> = m.output_bytes(0).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(out, [11., 22., 33., 44.]);
    }
    // The input (offset 0) and the sum (offset 16) are in the placed memory.
    let bytes = bytemuck_bytes(&mut memory);
    assert_eq!(&bytes[..16], &x[..]);
    assert_eq!(f32::from_le_bytes(bytes[16..20].try_into().unwrap()), 11.);
    assert!(bytes[64..].iter().all(|&b| b == 0xff));

    // Wrong count, too small, misaligned: load errors, not panics.
    let mut small = [0u128; 2];
    let e = program.load_method_in("forward", &registry(), &BackendRegistry::new(), vec![bytemuck_bytes(&mut small)]).err().expect("too small");
    assert!(e.to_string().contains("planned buffer 1 needs 64 bytes, the placed arena has 32"), "{e}");
    let e = program.load_method_in("forward", &registry(), &BackendRegistry::new(), vec![]).err().expect("no arena");
    assert!(e.to_string().contains("plans 1 memory arena(s), the caller placed 0"), "{e}");
    let mut big = [0u128; 6];
    let e = program.load_method_in("forward", &registry(), &BackendRegistry::new(), vec![&mut bytemuck_bytes(&mut big)[1..66]]).err().expect("misaligned");
    assert!(e.to_string().contains("is not"), "{e}");
}

fn bytemuck_bytes(words: &mut [u128]) -> &mut [u8] {
    // SAFETY: u128 has no padding and any byte pattern is a valid u8; the length covers exactly
    // the words' bytes, borrowed mutably for the returned lifetime.
    unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), core::mem::size_of_val(words)) }
}

/// Malformed values are rejected with messages that name the value and the numbers at fault.
#[test]
fn invalid_values_are_named_in_load_errors() {
    let load_error = |values: Vec<EValue<'static>>| -> String {
        let p = Program { execution_plan: Some(vec![plan("m", values, &[], &[], vec![], &[])]), ..Default::default() };
        let bytes = write_pte(&p, &[]);
        let buf = aligned(&bytes);
        let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
        match program.load_method("m", &registry(), &BackendRegistry::new()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("loaded"),
        }
    };
    let with = |f: &dyn Fn(&mut Tensor<'static>)| {
        let mut v = tensor(&[1], false, 0, Some(0));
        if let Some(KernelTypes::Tensor(t)) = &mut v.val {
            f(t);
        }
        vec![tensor(&[1], false, 0, Some(0)), v]
    };
    static BAD_ORDER: [u8; 2] = [0, 7];
    let e = load_error(with(&|t| {
        t.sizes = Some(vec![2, 2]);
        t.dim_order = Some(&BAD_ORDER);
    }));
    assert!(e.ends_with("value 1: dim_order entry 1 is 7 (out of range or repeated), not a permutation of 0..2"), "{e}");
    let e = load_error(with(&|t| t.sizes = Some(vec![2, 2])));
    assert!(e.ends_with("value 1: dim_order has 1 entries for rank 2"), "{e}");
    let e = load_error(with(&|t| t.sizes = Some(vec![-3])));
    assert!(e.ends_with("value 1: negative size -3"), "{e}");
    let e = load_error(with(&|t| t.scalar_type = -2));
    assert!(e.ends_with("value 1: unknown scalar type -2"), "{e}");
    let e = load_error(with(&|t| t.sizes = Some(vec![100])));
    assert!(e.ends_with("value 1: 400 bytes at offset 0 exceed planned buffer 1 of 64 bytes"), "{e}");
    let e = load_error(vec![EValue { val: Some(KernelTypes::IntList(IntList { items: Some(vec![0, 5]) })) }]);
    assert!(e.ends_with("value 0: reference to value 5 out of range (1 values)"), "{e}");
}
