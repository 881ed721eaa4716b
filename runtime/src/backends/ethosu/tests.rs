//! Driver and backend tests against the register-level model (no NPU simulator exists here).

use super::blob::{self, VelaBlobBuf, VelaIo};
use super::driver::{DriverConfig, EthosU, NpuError};
use super::model::{RegisterModel, RunRecord};
use super::regs::{reg, status, NpuRegisters};
use alloc::boxed::Box;
use alloc::vec;

const ID: u32 = 0x1001_0000;
/// CONFIG as Vela 5.2 compiles for ethos-u55-128: 2^7 MACs/cycle, 24 KiB SHRAM, stream version 0.
const CONFIG_U55_128: u32 = 0x0000_1807;

fn ok_model() -> RegisterModel {
    RegisterModel::new(ID, CONFIG_U55_128, Box::new(|_| status::CMD_END_REACHED))
}

#[test]
fn driver_follows_the_sequence() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    let info = npu.reset().unwrap();
    assert_eq!(info.macs_per_cc_log2(), 7);
    npu.invoke(0x7000_0010, 64, &[0x7010_0000, 0x3100_0000, 0], &mut || {}).unwrap();
    npu.invoke(0x7000_0010, 64, &[0x7010_0000, 0x3100_0000, 0], &mut || {}).unwrap();
    let m = npu.regs();
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    assert_eq!(m.runs.len(), 2);
    assert_eq!(m.runs[0].qbase, 0x7000_0010);
    assert_eq!(m.runs[0].qsize, 64);
    assert_eq!(&m.runs[0].bases[..3], &[0x7010_0000, 0x3100_0000, 0]);
    assert_eq!(m.runs[0].bases_written, 0b111);
    // After the run the Q-channels are enabled again (NPU may power down).
    assert_eq!(m.read(reg::CMD), super::regs::cmd::PWR_CLK_MASK);
}

#[test]
fn driver_resets_lazily_before_the_first_run() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    npu.invoke(0x100, 16, &[0x200], &mut || {}).unwrap();
    let m = npu.regs();
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    let first_reset = m.log.iter().position(|&(w, o, _)| w && o == reg::RESET).unwrap();
    let first_qbase = m.log.iter().position(|&(w, o, _)| w && o == reg::QBASE).unwrap();
    assert!(first_reset < first_qbase);
}

#[test]
fn model_catches_a_wrong_sequence() {
    // Start without reset, without QSIZE.
    let mut m = ok_model();
    m.write(reg::QBASE, 0x100);
    m.write(reg::CMD, 1);
    let v = m.violations.join("; ");
    assert!(v.contains("not reset"), "{v}");
    assert!(v.contains("QSIZE not programmed"), "{v}");
    assert!(v.contains("QBASE_HI not programmed"), "{v}");
    assert!(m.runs.is_empty());
}

#[test]
fn model_catches_writes_while_running() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    npu.start(0x100, 16, &[0x200, 0x300]).unwrap();
    npu.regs().write(reg::basep(1), 0x400);
    assert!(npu.regs().violations.iter().any(|v| v.contains("while the NPU runs")));
}

#[test]
fn faults_are_reported_and_the_npu_reset() {
    let hook = Box::new(|_: &RunRecord| status::BUS_STATUS);
    let mut npu = EthosU::new(RegisterModel::new(ID, CONFIG_U55_128, hook), DriverConfig::default());
    let e = npu.invoke(0x100, 32, &[0x200, 0x300], &mut || {}).unwrap_err();
    match e {
        NpuError::Fault { status: s, qread } => {
            assert!(s & status::BUS_STATUS != 0);
            assert_eq!(qread, 16);
        }
        e => panic!("{e:?}"),
    }
    let text = alloc::format!("{e}");
    assert!(text.contains("bus error") && text.contains("not reached"), "{text}");
    // The driver reset the NPU after the fault.
    let resets = npu.regs().log.iter().filter(|&&(w, o, _)| w && o == reg::RESET).count();
    assert_eq!(resets, 2);
    assert!(npu.regs().violations.is_empty(), "{:?}", npu.regs().violations);

    let hook = Box::new(|_: &RunRecord| status::CMD_PARSE_ERROR);
    let mut npu = EthosU::new(RegisterModel::new(ID, CONFIG_U55_128, hook), DriverConfig::default());
    let e = npu.invoke(0x100, 32, &[], &mut || {}).unwrap_err();
    assert!(alloc::format!("{e}").contains("parse error"));
}

#[test]
fn bad_arguments_are_refused_before_touching_the_npu() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    assert_eq!(npu.invoke(0x108, 16, &[], &mut || {}), Err(NpuError::Misaligned { what: "command stream", addr: 0x108 }));
    assert_eq!(npu.invoke(0x100, 0, &[], &mut || {}), Err(NpuError::BadCommandStream { len: 0 }));
    assert_eq!(npu.invoke(0x100, 6, &[], &mut || {}), Err(NpuError::BadCommandStream { len: 6 }));
    assert!(matches!(npu.invoke(0x100, 16, &[0x104], &mut || {}), Err(NpuError::Misaligned { .. })));
    assert!(matches!(npu.invoke(0x100, 16, &[0; 9], &mut || {}), Err(NpuError::TooManyBases { count: 9 })));
    assert!(npu.regs().runs.is_empty());
}

#[test]
fn timeout_reports_progress() {
    let mut m = ok_model();
    m.run_polls = 1000;
    let mut npu = EthosU::new(m, DriverConfig { run_polls: 10, ..DriverConfig::default() });
    let mut idles = 0;
    let e = npu.invoke(0x100, 16, &[], &mut || idles += 1).unwrap_err();
    assert!(matches!(e, NpuError::Timeout { .. }), "{e:?}");
    assert_eq!(idles, 9);
}

#[test]
fn irq_path() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    npu.start(0x100, 16, &[]).unwrap();
    // Simulate the interrupt arriving once the model finished.
    for _ in 0..3 {
        npu.regs().read(reg::STATUS);
    }
    npu.on_irq();
    npu.wait(&mut || {}).unwrap();
    assert!(npu.regs().violations.is_empty(), "{:?}", npu.regs().violations);
    assert_eq!(npu.regs().read(reg::STATUS) & status::IRQ_RAISED, 0);
}

/// A blob whose "network" adds 1 to each of 8 int8 input bytes (input at scratch offset 0,
/// output at 16). The model's hook plays the NPU: it reads and writes scratch through BASEP1.
#[cfg(feature = "harness")]
#[test]
fn backend_copies_io_per_the_table() {
    use super::{EthosUBackend, EthosUConfig};
    use crate::backend::{Backend, BackendInitContext, DelegateHandle};
    use crate::harness::OpHarness;
    use crate::kernel::{KernelArgs, KernelContext, KernelResult};
    use crate::ScalarType;
    use core::cell::RefCell;

    let blob = blob::write(&VelaBlobBuf {
        cmd_data: super::payload::build(CONFIG_U55_128, ID, &[0x11; 8]),
        weight_data: vec![1; 5],
        weight_key: None,
        scratch_size: 64,
        inputs: vec![VelaIo { shape: [1, 1, 1, 2, 2, 2], elem_size: 1, offset: 0, region: 1 }],
        outputs: vec![VelaIo { shape: [1, 1, 1, 1, 1, 8], elem_size: 1, offset: 16, region: 1 }],
    });
    let hook = Box::new(|r: &RunRecord| {
        let scratch = r.bases[1] as usize as *mut i8;
        // SAFETY: BASEP1 is the address of the handle's 64-byte scratch buffer (identity NPU
        // address map), alive and not otherwise borrowed while the driver runs the NPU.
        let s = unsafe { core::slice::from_raw_parts_mut(scratch, 64) };
        for k in 0..8 {
            s[16 + k] = s[k].wrapping_add(1);
        }
        status::CMD_END_REACHED
    });
    let backend =
        EthosUBackend::new(EthosU::new(RegisterModel::new(ID, CONFIG_U55_128, hook), DriverConfig::default()), EthosUConfig::default());
    let named = |_: &str| None;
    let ctx = BackendInitContext { named_data: &named };
    let handle = backend.init(&ctx, &blob, &[]).unwrap();

    std::thread_local! { static H: RefCell<Option<Box<dyn DelegateHandle>>> = RefCell::new(None); }
    H.with(|h| *h.borrow_mut() = Some(handle));
    fn call(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        H.with(|h| h.borrow_mut().as_mut().unwrap().execute(ctx, args))
    }
    let mut hs = OpHarness::new();
    let x = hs.tensor::<i8>(ScalarType::Char, &[1, 2, 2, 2], &[-128, -1, 0, 1, 2, 3, 100, 127]);
    let y = hs.out(ScalarType::Char, &[1, 8]);
    hs.call(call, &[x, y]).unwrap();
    assert_eq!(hs.read::<i8>(y), vec![-127, 0, 1, 2, 3, 4, 101, -128]);
    {
        let rc = backend.npu();
        let mut d = rc.borrow_mut();
        assert!(d.regs().violations.is_empty(), "{:?}", d.regs().violations);
        assert_eq!(d.regs().runs.len(), 1);
        assert_eq!(d.regs().runs[0].qsize, 32);
        // QBASE points at the stream inside the payload, 16-aligned.
        assert_eq!(d.regs().runs[0].qbase % 16, 0);
    }
    // Wrong input size: a clear error naming the input.
    let mut hs = OpHarness::new();
    let x = hs.tensor::<i8>(ScalarType::Char, &[4], &[0, 0, 0, 0]);
    let y = hs.out(ScalarType::Char, &[1, 8]);
    let e = hs.call(call, &[x, y]).unwrap_err();
    assert!(e.message.contains("input 0 has 4 bytes"), "{}", e.message);
}

#[test]
fn backend_init_rejects_bad_blobs() {
    use super::{EthosUBackend, EthosUConfig};
    use crate::backend::{Backend, BackendInitContext};
    let backend = EthosUBackend::new(EthosU::new(ok_model(), DriverConfig::default()), EthosUConfig::default());
    let named = |_: &str| None;
    let ctx = BackendInitContext { named_data: &named };
    let e = backend.init(&ctx, b"not a blob", &[]).err().unwrap();
    assert!(e.contains("vela_bin_stream"), "{e}");
    let mut b = VelaBlobBuf { cmd_data: vec![0; 16], scratch_size: 8, ..Default::default() };
    let e = backend.init(&ctx, &blob::write(&b), &[]).err().unwrap();
    assert!(e.contains("cmd_data") && e.contains("COP1"), "{e}");
    b.cmd_data = super::payload::build(CONFIG_U55_128, ID, &[0; 4]);
    b.inputs.push(VelaIo { shape: [1, 1, 1, 1, 1, 16], elem_size: 1, offset: 0, region: 1 });
    let e = backend.init(&ctx, &blob::write(&b), &[]).err().unwrap();
    assert!(e.contains("past the scratch size"), "{e}");
    b.inputs[0].region = 0;
    let e = backend.init(&ctx, &blob::write(&b), &[]).err().unwrap();
    assert!(e.contains("region 0"), "{e}");
    b.inputs.clear();
    b.weight_key = Some("deadbeef".into());
    let e = backend.init(&ctx, &blob::write(&b), &[]).err().unwrap();
    assert!(e.contains("deadbeef"), "{e}");
}

#[test]
fn payload_runs_each_stream_and_checks_the_config() {
    let p = super::payload::build(CONFIG_U55_128, ID, &[0x11; 8]);
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    npu.run_payload(&p, 0x7000_0000, &[0x7010_0000, 0x3100_0000], &mut || {}).unwrap();
    assert!(npu.regs().violations.is_empty(), "{:?}", npu.regs().violations);
    assert_eq!(npu.regs().runs[0].qbase, 0x7000_0000 + 32);
    assert_eq!(npu.regs().runs[0].qsize, 32);
    // Compiled for 256 MACs/cycle, run on a 128-MAC NPU.
    let p256 = super::payload::build(0x0000_1808, ID, &[0x11; 8]);
    let e = npu.run_payload(&p256, 0x7000_0000, &[], &mut || {}).unwrap_err();
    let m = alloc::format!("{e}");
    assert!(m.contains("MACs/cycle 256 vs this NPU's 128"), "{m}");
    assert_eq!(npu.regs().runs.len(), 1);
    // Malformed payload.
    let e = npu.run_payload(b"COP1\x09\0\0\0", 0, &[], &mut || {}).unwrap_err();
    assert!(matches!(e, NpuError::BadPayload(_)), "{e:?}");
}

/// An external `weight_data` block: the weights come from the program's named data by key,
/// and BASEP0 points at them when the NPU runs.
#[cfg(feature = "harness")]
#[test]
fn external_weights_come_from_named_data() {
    use super::{EthosUBackend, EthosUConfig};
    use crate::backend::{Backend, BackendInitContext, DelegateHandle};
    use crate::harness::OpHarness;
    use crate::kernel::{KernelArgs, KernelContext, KernelResult};
    use crate::ScalarType;
    use core::cell::RefCell;

    static WEIGHTS: [u8; 48] = [7; 48];
    let b = VelaBlobBuf {
        cmd_data: super::payload::build(CONFIG_U55_128, ID, &[0; 4]),
        weight_key: Some("w-key".into()),
        scratch_size: 32,
        inputs: vec![VelaIo { shape: [1, 1, 1, 1, 1, 4], elem_size: 1, offset: 0, region: 1 }],
        outputs: vec![VelaIo { shape: [1, 1, 1, 1, 1, 4], elem_size: 1, offset: 16, region: 1 }],
        ..Default::default()
    };
    let hook = Box::new(|r: &RunRecord| {
        // SAFETY: BASEP0 is the handle's 48-byte weight copy and BASEP1 its 32-byte scratch
        // (identity address map), alive and unborrowed while the NPU "runs".
        let (w, s) = unsafe {
            (
                core::slice::from_raw_parts(r.bases[0] as usize as *const u8, 48),
                core::slice::from_raw_parts_mut(r.bases[1] as usize as *mut u8, 32),
            )
        };
        for k in 0..4 {
            s[16 + k] = s[k] + w[k];
        }
        status::CMD_END_REACHED
    });
    let backend =
        EthosUBackend::new(EthosU::new(RegisterModel::new(ID, CONFIG_U55_128, hook), DriverConfig::default()), EthosUConfig::default());
    fn named(k: &str) -> Option<&'static [u8]> {
        (k == "w-key").then_some(&WEIGHTS[..])
    }
    let handle = backend.init(&BackendInitContext { named_data: &named }, &blob::write(&b), &[]).unwrap();
    std::thread_local! { static H: RefCell<Option<Box<dyn DelegateHandle>>> = RefCell::new(None); }
    H.with(|h| *h.borrow_mut() = Some(handle));
    fn call(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        H.with(|h| h.borrow_mut().as_mut().unwrap().execute(ctx, args))
    }
    let mut hs = OpHarness::new();
    let x = hs.tensor::<u8>(ScalarType::Byte, &[4], &[1, 2, 3, 4]);
    let y = hs.out(ScalarType::Byte, &[4]);
    hs.call(call, &[x, y]).unwrap();
    assert_eq!(hs.read::<u8>(y), vec![8, 9, 10, 11]);
}

#[test]
fn axi_settings_follow_every_reset() {
    let cfg = DriverConfig { qconfig: Some(2), regioncfg: Some(0x33), axi_limits: Some([0x0f1f_0000, 1, 2, 3]), ..DriverConfig::default() };
    let mut npu = EthosU::new(ok_model(), cfg);
    npu.run_payload(&super::payload::build(CONFIG_U55_128, ID, &[0; 4]), 0x100, &[0x200, 0x300], &mut || {}).unwrap();
    let m = npu.regs();
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    let reset_at = m.log.iter().rposition(|&(w, o, _)| w && o == reg::RESET).unwrap();
    let after: Vec<(u32, u32)> = m.log[reset_at..].iter().filter(|&&(w, _, _)| w).map(|&(_, o, v)| (o, v)).collect();
    for want in [(reg::QCONFIG, 2), (reg::REGIONCFG, 0x33), (reg::AXI_LIMIT0, 0x0f1f_0000), (reg::AXI_LIMIT0 + 12, 3)] {
        assert!(after.contains(&want), "{want:x?} not written after the reset: {after:x?}");
    }
    let qbase_at = after.iter().position(|&(o, _)| o == reg::QBASE).unwrap();
    let region_at = after.iter().position(|&(o, _)| o == reg::REGIONCFG).unwrap();
    assert!(region_at < qbase_at);
}

#[test]
fn model_catches_a_run_with_power_gating_enabled() {
    let mut npu = EthosU::new(ok_model(), DriverConfig::default());
    npu.reset().unwrap();
    let m = npu.regs();
    m.write(reg::QBASE, 0x100);
    m.write(reg::QBASE_HI, 0);
    m.write(reg::QSIZE, 16);
    m.write(reg::CMD, super::regs::cmd::PWR_CLK_MASK | 1);
    assert!(m.violations.iter().any(|v| v.contains("power Q-channel")), "{:?}", m.violations);
}
