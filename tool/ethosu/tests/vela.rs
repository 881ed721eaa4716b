//! End-to-end: int8 network → TFLite → Vela (ethos-u55-128) → delegate blob → runtime parser.
//! Needs Vela (`.venv/bin/vela`, `$RBUILD_VELA` or PATH); prints `SKIPPED` and passes without it.

use std::path::{Path, PathBuf};

use rbuild_ethosu::blob::{self, BlockData};
use rbuild_runtime::backends::ethosu::payload::{self, Action};

/// log2(MACs/cycle) in the payload's OPTIMIZER_CONFIG (checked by the driver against the NPU).
fn compiled_macs_log2(cmd: &[u8]) -> u32 {
    let actions = payload::parse(cmd).unwrap();
    let Some(Action::OptimizerConfig { config, .. }) = actions.first() else { panic!("no optimizer config: {actions:?}") };
    assert!(actions.iter().any(|a| matches!(a, Action::CommandStream { .. })));
    config & 0xF
}
use rbuild_ethosu::lower::{lower, LowerError};
use rbuild_ethosu::testnet::{conv_dw_add_pool_fc, Pooling};
use rbuild_ethosu::vela::{Vela, VelaError, VelaOptions};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn vela() -> Option<Vela> {
    match Vela::locate(&[&repo_root()]) {
        Ok(v) => Some(v),
        Err(e) => {
            println!("SKIPPED: {e}");
            None
        }
    }
}

#[test]
fn small_network_fully_on_the_npu_u55_128() {
    let Some(vela) = vela() else { return };
    for pooling in [Pooling::AveragePool, Pooling::Mean] {
        let g = conv_dw_add_pool_fc(16, 16, 8, 16, 10, pooling);
        let opts = VelaOptions::for_accelerator("ethos-u55-128").unwrap();
        let l = lower(&g, &vela, &opts).unwrap_or_else(|e| panic!("{pooling:?}: {e}"));
        assert_eq!(l.summary.cpu_operators, Some(0), "{pooling:?}: {:?}", l.summary.fields);
        assert!(l.summary.npu_operators.unwrap_or(0) >= 5, "{:?}", l.summary.fields);
        assert!(l.summary.npu_cycles.unwrap_or(0) > 0, "{:?}", l.summary.fields);
        assert!(l.summary.sram_used_kib.is_some(), "{:?}", l.summary.fields);
        let p = blob::parse(&l.blob).unwrap();
        let BlockData::Inline(cmd) = p.cmd_data else { panic!("external cmd") };
        assert!(!cmd.is_empty() && cmd.len() % 4 == 0);
        assert_eq!(compiled_macs_log2(cmd), 7, "ethos-u55-128 = 2^7 MACs/cycle");
        assert_eq!(cmd, &l.raw.cmd_data[..]);
        let BlockData::Inline(w) = p.weight_data else { panic!("external weights") };
        assert!(!w.is_empty());
        assert!(p.scratch_size as usize >= 16 * 16 * 8);
        assert_eq!(p.inputs.len(), 1);
        assert_eq!(p.inputs[0].shape, [1, 1, 1, 16, 16, 8]);
        assert_eq!(p.inputs[0].elem_size, 1);
        assert_eq!(p.inputs[0].region, 1);
        assert_eq!(p.outputs.len(), 1);
        assert_eq!(p.outputs[0].byte_len(), Some(10));
        println!(
            "{pooling:?}: Vela {} cmd {} B, weights {} B, scratch {} B, summary {:?}",
            l.vela_version,
            cmd.len(),
            w.len(),
            p.scratch_size,
            l.summary
        );
        // Weights moved to named data: the block is flagged external and holds the key.
        let mut ext = l.clone();
        let key = ext.externalize_weights().unwrap();
        assert_eq!(key.len(), 64);
        let pe = blob::parse(&ext.blob).unwrap();
        assert_eq!(pe.weight_data, BlockData::External(&key[..]));
        assert_eq!(pe.cmd_data, p.cmd_data);
        assert_eq!(ext.external_weights.as_ref().unwrap().1, w);
        assert!(ext.blob.len() < l.blob.len());
    }
}

#[test]
fn other_accelerators() {
    let Some(vela) = vela() else { return };
    let g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::AveragePool);
    for (acc, macs_log2) in [("ethos-u55-32", 5), ("ethos-u65-256", 8), ("ethos-u85-256", 8)] {
        let opts = VelaOptions::for_accelerator(acc).unwrap();
        let l = lower(&g, &vela, &opts).unwrap_or_else(|e| panic!("{acc}: {e}"));
        assert_eq!(l.summary.cpu_operators, Some(0), "{acc}");
        let p = blob::parse(&l.blob).unwrap();
        let BlockData::Inline(cmd) = p.cmd_data else { panic!() };
        assert_eq!(compiled_macs_log2(cmd), macs_log2, "{acc}");
    }
}

#[test]
fn shipped_vela_ini_is_accepted() {
    let Some(vela) = vela() else { return };
    let g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::AveragePool);
    let ini = repo_root().join("toolchains/vela.ini");
    let opts = VelaOptions {
        accelerator: "ethos-u55-128".into(),
        system_config: "Corstone_300_U55".into(),
        memory_mode: "Shared_Sram".into(),
        config_files: vec![ini.display().to_string()],
        extra_args: vec![],
    };
    let l = lower(&g, &vela, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(l.summary.cpu_operators, Some(0));
}

#[test]
fn bad_options_and_failures_are_clear() {
    assert!(matches!(VelaOptions::for_accelerator("ethos-u99"), Err(VelaError::BadOption(_))));
    let Some(vela) = vela() else { return };
    let g = conv_dw_add_pool_fc(8, 8, 4, 8, 4, Pooling::AveragePool);
    let mut opts = VelaOptions::for_accelerator("ethos-u55-128").unwrap();
    opts.system_config = "No_Such_System".into();
    let e = lower(&g, &vela, &opts).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, LowerError::Vela(VelaError::Failed { .. })), "{m}");
    assert!(m.contains("No_Such_System"), "{m}");
}

#[test]
fn missing_vela_names_the_install_hint() {
    let e = Vela::at(Path::new("/nonexistent/vela")).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("/nonexistent/vela"), "{m}");
    let e = VelaError::NotFound { searched: vec![PathBuf::from("/x/.venv/bin/vela")] };
    let m = e.to_string();
    assert!(m.contains("pip install ethos-u-vela") && m.contains("/x/.venv/bin/vela"), "{m}");
    // A file that is not Vela fails the version check with the hint.
    let e = Vela::at(Path::new("/bin/true")).unwrap_err();
    assert!(e.to_string().contains("pip install ethos-u-vela"), "{e}");
}

/// MobileNetV2's int8 operator set and shapes (synthetic weights), 224×224, 1000 classes:
/// Vela must place every operator on an ethos-u55-128 (CPU operators = 0).
#[test]
fn mobilenet_v2_fully_on_the_npu_u55_128() {
    let Some(vela) = vela() else { return };
    let g = rbuild_ethosu::testnet::mobilenet_v2(224, 1000, Pooling::Mean);
    let convs = g.ops.iter().filter(|o| matches!(o.kind, rbuild_ethosu::graph::OpKind::Conv2d { .. })).count();
    let dws = g.ops.iter().filter(|o| matches!(o.kind, rbuild_ethosu::graph::OpKind::DepthwiseConv2d { .. })).count();
    let adds = g.ops.iter().filter(|o| matches!(o.kind, rbuild_ethosu::graph::OpKind::Add { .. })).count();
    assert_eq!((convs, dws, adds), (35, 17, 10), "MobileNetV2 has 35 convs, 17 depthwise, 10 residual adds");
    let opts = VelaOptions::for_accelerator("ethos-u55-128").unwrap();
    let l = lower(&g, &vela, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(l.summary.cpu_operators, Some(0), "{:?}", l.summary.fields);
    let p = blob::parse(&l.blob).unwrap();
    assert_eq!(p.inputs[0].shape, [1, 1, 1, 224, 224, 3]);
    assert_eq!(p.outputs[0].byte_len(), Some(1000));
    let BlockData::Inline(cmd) = p.cmd_data else { panic!() };
    assert_eq!(compiled_macs_log2(cmd), 7);
    println!(
        "MobileNetV2 u55-128: NPU ops {:?}, cycles {:?} (total {:?}), SRAM {:?} KiB, off-chip {:?} KiB, {:?} ms; blob {} B (cmd {} B), scratch {} B",
        l.summary.npu_operators,
        l.summary.npu_cycles,
        l.summary.total_cycles,
        l.summary.sram_used_kib,
        l.summary.offchip_used_kib,
        l.summary.inference_time_ms,
        l.blob.len(),
        cmd.len(),
        p.scratch_size
    );
}

/// Operators Vela cannot place on the NPU stay on the CPU: lowering fails and names them with
/// Vela's reason. (A MEAN over the channel axis of a [1,4,4,1024] tensor: "Unsupported
/// depth-reduction" on U55.) Once alone, and once after a conv that does go to the NPU.
#[test]
fn operators_left_on_the_cpu_fail_the_lowering() {
    let Some(vela) = vela() else { return };
    use rbuild_ethosu::graph::{Activation, Int8Graph, OpKind, Padding};
    for with_conv in [false, true] {
        let mut g = Int8Graph::default();
        let x = g.activation("x", &[1, 4, 4, 16], 0.05, 0);
        let mut m_in = x;
        if with_conv {
            let w = g.weight("w", &[1024, 1, 1, 16], &vec![1; 1024 * 16], vec![0.01; 1024], 0);
            let b = g.bias("b", &vec![0; 1024], vec![0.0005; 1024]);
            let c = g.activation("conv.out", &[1, 4, 4, 1024], 0.05, 0);
            g.op(OpKind::Conv2d { stride: [1, 1], dilation: [1, 1], padding: Padding::Same, act: Activation::None }, &[x, w, b], &[c]);
            m_in = c;
        } else {
            g.tensors[x].shape = vec![1, 4, 4, 1024];
        }
        let axes = g.int32_const("axes", &[3]);
        let y = g.activation("mean.out", &[1, 4, 4, 1], 0.05, 0);
        g.op(OpKind::Mean { keep_dims: true }, &[m_in, axes], &[y]);
        g.inputs = vec![x];
        g.outputs = vec![y];
        let e = lower(&g, &vela, &VelaOptions::for_accelerator("ethos-u55-128").unwrap()).unwrap_err();
        let m = e.to_string();
        let cpu_ops = match &e {
            LowerError::NotFullyDelegated { cpu_ops, .. } => cpu_ops.clone(),
            LowerError::Vela(VelaError::UnsupportedOperators { cpu_ops, .. }) => cpu_ops.clone(),
            _ => panic!("with_conv={with_conv}: {m}"),
        };
        assert_eq!(cpu_ops.len(), 1, "{m}");
        assert_eq!((cpu_ops[0].op.as_str(), cpu_ops[0].ofm.as_str()), ("MEAN", "mean.out"), "{m}");
        assert!(m.contains("depth-reduction"), "{m}");
        println!("with_conv={with_conv}: {m}");
    }
}

/// With `RBUILD_VELA` pointing nowhere, locating fails with the install hint (and the Vela tests
/// of this file print SKIPPED instead of failing — see `vela()`). Run in a child process so the
/// environment change stays out of the other tests.
#[test]
fn explicit_rbuild_vela_is_honoured() {
    if std::env::var_os("RBUILD_ETHOSU_CHILD").is_some() {
        let e = Vela::locate(&[&repo_root()]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("/nonexistent/vela") && m.contains("pip install ethos-u-vela"), "{m}");
        assert!(vela().is_none());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "explicit_rbuild_vela_is_honoured", "--nocapture"])
        .env("RBUILD_ETHOSU_CHILD", "1")
        .env("RBUILD_VELA", "/nonexistent/vela")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SKIPPED: Vela (the Ethos-U compiler) not found"), "{text}");
}
