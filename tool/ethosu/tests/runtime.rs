//! A Vela-compiled blob through the runtime's `EthosUBackend` over the register-level model:
//! the blob and its COP1 payload parse, the optimizer config matches the modelled U55-128, the
//! driver programs QBASE/QSIZE/BASEPn per the documented sequence, inputs land in the scratch at
//! the IO table's offset and outputs are read back from theirs. The model does not execute the
//! command stream (no NPU simulator here): its hook plays the NPU by writing a known output.

use std::cell::RefCell;
use std::path::Path;

use rbuild_ethosu::lower::lower;
use rbuild_ethosu::testnet::{conv_dw_add_pool_fc, Pooling};
use rbuild_ethosu::vela::{Vela, VelaOptions};
use rbuild_runtime::backend::{Backend, BackendInitContext, DelegateHandle};
use rbuild_runtime::backends::ethosu::driver::{DriverConfig, EthosU};
use rbuild_runtime::backends::ethosu::model::{RegisterModel, RunRecord};
use rbuild_runtime::backends::ethosu::payload::{self, Action};
use rbuild_runtime::backends::ethosu::regs::status;
use rbuild_runtime::backends::ethosu::{blob, EthosUBackend, EthosUConfig};
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::{KernelArgs, KernelContext, KernelResult, ScalarType};

thread_local! { static H: RefCell<Option<Box<dyn DelegateHandle>>> = RefCell::new(None); }
fn call(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    H.with(|h| h.borrow_mut().as_mut().expect("handle").execute(ctx, args))
}

#[test]
fn vela_blob_runs_through_the_backend_on_the_register_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let vela = match Vela::locate(&[&root]) {
        Ok(v) => v,
        Err(e) => return println!("SKIPPED: {e}"),
    };
    let g = conv_dw_add_pool_fc(16, 16, 8, 16, 10, Pooling::Mean);
    let l = lower(&g, &vela, &VelaOptions::for_accelerator("ethos-u55-128").unwrap()).unwrap();
    let parsed = blob::parse(&l.blob).unwrap();
    let (in_io, out_io) = (parsed.inputs[0], parsed.outputs[0]);
    let blob::BlockData::Inline(cmd) = parsed.cmd_data else { panic!() };
    let actions = payload::parse(cmd).unwrap();
    let Some(&Action::OptimizerConfig { config, id }) = actions.first() else { panic!("{actions:?}") };
    let Some(&Action::CommandStream { offset: cs_off, len: cs_len }) = actions.iter().find(|a| matches!(a, Action::CommandStream { .. }))
    else {
        panic!()
    };

    // The "NPU": check the input reached the scratch, write a known output.
    let (ii, oo) = (in_io.offset as usize, out_io.offset as usize);
    let scratch_len = parsed.scratch_size as usize;
    let hook = Box::new(move |r: &RunRecord| {
        // SAFETY: BASEP1 is the address of the delegate's scratch buffer (scratch_len bytes,
        // identity NPU address map), alive and not otherwise borrowed while the NPU "runs".
        let s = unsafe { std::slice::from_raw_parts_mut(r.bases[1] as usize as *mut i8, scratch_len) };
        let ok = (0..16 * 16 * 8).all(|k| s[ii + k] == ((k % 200) as i32 - 100) as i8);
        for k in 0..10 {
            s[oo + k] = if ok { k as i8 * 3 - 7 } else { 0 };
        }
        status::CMD_END_REACHED
    });
    // A U55-128 whose CONFIG/ID registers read what Vela compiled for.
    let model = RegisterModel::new(id, config, hook);
    let backend = EthosUBackend::new(EthosU::new(model, DriverConfig::default()), EthosUConfig::default());
    let named = |_: &str| None;
    let handle = backend.init(&BackendInitContext { named_data: &named }, &l.blob, &[]).unwrap();
    H.with(|h| *h.borrow_mut() = Some(handle));

    let input: Vec<i8> = (0..16 * 16 * 8).map(|k| ((k % 200) - 100) as i8).collect();
    let mut hs = OpHarness::new();
    let x = hs.tensor::<i8>(ScalarType::Char, &[1, 16, 16, 8], &input);
    let y = hs.out(ScalarType::Char, &[1, 10]);
    hs.call(call, &[x, y]).unwrap();
    assert_eq!(hs.read::<i8>(y), (0..10).map(|k| k as i8 * 3 - 7).collect::<Vec<_>>());

    let npu = backend.npu();
    let mut npu = npu.borrow_mut();
    let m = npu.regs();
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    assert_eq!(m.runs.len(), 1);
    assert_eq!(m.runs[0].qsize as usize, cs_len);
    assert_eq!(m.runs[0].qbase % 16, 0);
    assert_eq!(m.runs[0].bases_written & 0b11, 0b11, "BASEP0 (weights) and BASEP1 (scratch) programmed");
    let _ = cs_off;
}
