//! A `.pte` whose forward is one `EthosUBackend` delegate call holding a Vela-compiled blob:
//! our runtime loads it (naming the backend when it is not registered) and runs it through the
//! backend on the register model; ExecuTorch's own loader (executorch_numpy_runtime, when
//! installed in .venv) parses it up to the missing backend and names `EthosUBackend`.

use std::path::Path;

use rbuild_ethosu::lower::lower;
use rbuild_ethosu::testnet::{conv_dw_add_pool_fc, Pooling};
use rbuild_ethosu::vela::{Vela, VelaOptions};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::backends::ethosu::driver::{DriverConfig, EthosU};
use rbuild_runtime::backends::ethosu::model::{RegisterModel, RunRecord};
use rbuild_runtime::backends::ethosu::payload::{self, Action};
use rbuild_runtime::backends::ethosu::regs::status;
use rbuild_runtime::backends::ethosu::{blob, EthosUBackend, EthosUConfig, ETHOSU_BACKEND_ID};
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::format::schema::*;
use rbuild_runtime::format::write_pte;
use rbuild_runtime::kernel::KernelContext;
use rbuild_runtime::{KernelRegistry, LoadError, ScalarType};

fn int8_tensor<'a>(sizes: &[i32], dim_order: &'a [u8], offset: u32) -> EValue<'a> {
    EValue {
        val: Some(KernelTypes::Tensor(Tensor {
            scalar_type: ScalarType::Char.code() as i8,
            sizes: Some(sizes.to_vec()),
            dim_order: Some(dim_order),
            allocation_info: Some(AllocationDetails { memory_id: 1, memory_offset_low: offset, memory_offset_high: 0 }),
            ..Default::default()
        })),
    }
}

/// forward(x: int8[1,16,16,8]) -> int8[1,10] = EthosUBackend(blob)(x); blob in segment 1.
fn pte_with_delegate(blob: &[u8]) -> Vec<u8> {
    static DO4: [u8; 4] = [0, 1, 2, 3];
    static DO2: [u8; 2] = [0, 1];
    let forward = ExecutionPlan {
        name: Some("forward"),
        values: Some(vec![int8_tensor(&[1, 16, 16, 8], &DO4, 0), int8_tensor(&[1, 10], &DO2, 2048)]),
        inputs: Some(vec![0]),
        outputs: Some(vec![1]),
        chains: Some(vec![Chain {
            inputs: Some(vec![0]),
            outputs: Some(vec![1]),
            instructions: Some(vec![Instruction {
                instr_args: Some(InstructionArguments::DelegateCall(DelegateCall { delegate_index: 0, args: Some(vec![0, 1]) })),
            }]),
            ..Default::default()
        }]),
        operators: Some(vec![]),
        delegates: Some(vec![BackendDelegate {
            id: Some(ETHOSU_BACKEND_ID),
            processed: Some(BackendDelegateDataReference { location: 1, index: 1 }),
            compile_specs: Some(vec![CompileSpec { key: Some("compile_flags"), value: Some(b"--accelerator-config=ethos-u55-128") }]),
        }]),
        non_const_buffer_sizes: Some(vec![0, 2064]),
        ..Default::default()
    };
    // Segment 0: the (empty) constant segment ExecuTorch 1.x requires; segment 1: the blob.
    let program = Program {
        execution_plan: Some(vec![forward]),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0]) }),
        ..Default::default()
    };
    write_pte(&program, &[&[0u8; 16], blob])
}

#[test]
fn pte_with_an_ethosu_delegate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let vela = match Vela::locate(&[&root]) {
        Ok(v) => v,
        Err(e) => return println!("SKIPPED: {e}"),
    };
    let g = conv_dw_add_pool_fc(16, 16, 8, 16, 10, Pooling::AveragePool);
    let l = lower(&g, &vela, &VelaOptions::for_accelerator("ethos-u55-128").unwrap()).unwrap();
    let bytes = pte_with_delegate(&l.blob);

    // Our loader: the delegate blob comes back byte for byte from the segment.
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let e = program.load_method("forward", &KernelRegistry::new(), &BackendRegistry::new()).err().unwrap();
    assert!(matches!(&e, LoadError::BackendNotAvailable { id, .. } if id == "EthosUBackend"), "{e}");

    let parsed = blob::parse(&l.blob).unwrap();
    let blob::BlockData::Inline(cmd) = parsed.cmd_data else { panic!() };
    let Some(&Action::OptimizerConfig { config, id }) = payload::parse(cmd).unwrap().first() else { panic!() };
    let out_at = parsed.outputs[0].offset as usize;
    let scratch_len = parsed.scratch_size as usize;
    let hook = Box::new(move |r: &RunRecord| {
        // SAFETY: BASEP1 is the delegate's scratch buffer (scratch_len bytes, identity NPU
        // address map), alive and unborrowed while the NPU "runs".
        let s = unsafe { std::slice::from_raw_parts_mut(r.bases[1] as usize as *mut i8, scratch_len) };
        for k in 0..10 {
            s[out_at + k] = 42 - k as i8;
        }
        status::CMD_END_REACHED
    });
    let mut backends = BackendRegistry::new();
    backends.register(Box::new(EthosUBackend::new(
        EthosU::new(RegisterModel::new(id, config, hook), DriverConfig::default()),
        EthosUConfig::default(),
    )));
    let mut m = program.load_method("forward", &KernelRegistry::new(), &backends).unwrap();
    let x = vec![1u8; 16 * 16 * 8];
    m.set_input_tensor(0, ScalarType::Char, &[1, 16, 16, 8], &x).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    let out: Vec<i8> = m.output_bytes(0).unwrap().iter().map(|&b| b as i8).collect();
    assert_eq!(out, (0..10).map(|k| 42 - k as i8).collect::<Vec<_>>());

    // ExecuTorch's loader, when available: the file parses; method load stops at the backend.
    let py = root.join(".venv/bin/python");
    let probe = std::process::Command::new(&py).args(["-c", "import executorch_numpy_runtime"]).output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        return println!("SKIPPED (ExecuTorch part): executorch_numpy_runtime not importable from {}", py.display());
    }
    let path = std::env::temp_dir().join(format!("rbuild-ethosu-{}.pte", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let script = r#"
import sys
import executorch_numpy_runtime as et
rt = et.Runtime.get()
program = rt.load_program(open(sys.argv[1], "rb").read())
print("PROGRAM_LOADED methods=" + ",".join(program.method_names) if hasattr(program, "method_names") else "PROGRAM_LOADED")
sys.stdout.flush()
try:
    import numpy as np
    # executorch_numpy_runtime loads the method lazily; calling it runs Method::load.
    method = program.load_method("forward")
    method([np.ones((1, 16, 16, 8), dtype=np.int8)])
    print("METHOD_RAN")
except Exception as e:
    print("METHOD_ERROR " + type(e).__name__ + ": " + str(e))
"#;
    let out = std::process::Command::new(&py).args(["-c", script]).arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("ExecuTorch says:\n{text}");
    assert!(text.contains("PROGRAM_LOADED"), "ExecuTorch did not parse the program:\n{text}");
    assert!(text.contains("METHOD_ERROR"), "{text}");
    assert!(text.contains("Backend EthosUBackend is not registered"), "the load error should name the backend:\n{text}");
}
