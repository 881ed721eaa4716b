//! Fuzzes the whole path a program takes: parse, rewrite, load every method with every kernel,
//! bind zero inputs, execute. Any panic, hang or out-of-bounds access is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::format::schema::KernelTypes;
use rbuild_runtime::format::{rewrite, PteFile};
use rbuild_runtime::{KernelContext, Program, Value};

/// Methods planning more than this are skipped (a valid but huge plan is not a bug).
const MAX_PLANNED: i64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let buf = AlignedBuf::from_bytes(data);
    let Ok(file) = PteFile::parse(buf.as_slice()) else { return };
    // The writer must accept whatever the reader accepted, and reach the same tables.
    let written = rewrite(&file).expect("rewrite of a parsed file");
    let again = PteFile::parse(&written).expect("re-parse of our own output");
    // Every table survives except segment offsets, which the writer lays out afresh; segment
    // contents must survive. Compared through Debug so that NaN doubles count as equal.
    let without_layout = |p: &rbuild_runtime::format::schema::Program<'_>| {
        let mut p = p.clone();
        p.segments = None;
        format!("{p:?}")
    };
    assert_eq!(without_layout(&file.program), without_layout(&again.program));
    for i in 0..file.segments().len() {
        assert_eq!(file.segment(i).ok(), again.segment(i).ok());
    }
    assert_eq!(rewrite(&again).expect("second rewrite"), written);

    let Ok(program) = Program::load(buf.as_slice()) else { return };
    let kernels = rbuild_kernels::registry();
    let backends = BackendRegistry::new();
    for plan in program.plans() {
        let planned: i64 = plan.non_const_buffer_sizes.as_deref().unwrap_or(&[]).iter().fold(0i64, |a, &s| a.saturating_add(s.max(0)));
        // Tensors without planned memory get their own buffers at load: bound those too.
        let largest = plan.values.as_deref().unwrap_or(&[]).iter().filter_map(|v| match &v.val {
            Some(KernelTypes::Tensor(t)) => Some(t.sizes.as_deref().unwrap_or(&[]).iter().fold(8i64, |a, &d| a.saturating_mul(d.max(0) as i64))),
            _ => None,
        }).max().unwrap_or(0);
        if planned > MAX_PLANNED || largest > MAX_PLANNED {
            continue;
        }
        let Some(name) = plan.name else { continue };
        let Ok(mut method) = program.load_method(name, &kernels, &backends) else { continue };
        for i in 0..method.inputs().len() {
            if let Some(Value::Tensor(t)) = method.input_value(i) {
                let (dtype, sizes) = (t.dtype, t.shape.as_slice().to_vec());
                if t.nbytes() > MAX_PLANNED as usize {
                    return;
                }
                let zeros = vec![0u8; t.nbytes()];
                let _ = method.set_input_tensor(i, dtype, &sizes, &zeros);
            }
        }
        let _ = method.execute(&mut KernelContext::default());
    }
});
