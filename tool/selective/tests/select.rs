//! Operator lists come from the program; missing kernels are reported together, before any
//! compilation; the generated table names kernels by path.

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn mobilenet_ops_are_read_from_the_program_and_all_have_kernels() {
    let pte = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/models/mobilenet_v2/model.pte");
    let ops = rbuild_selective::program_ops(&std::fs::read(pte).unwrap()).unwrap();
    let want: BTreeSet<String> = [
        "aten::_native_batch_norm_legit_no_training.out",
        "aten::add.out",
        "aten::addmm.out",
        "aten::convolution.out",
        "aten::hardtanh.out",
        "aten::mean.out",
        "aten::permute_copy.out",
        "dim_order_ops::_clone_dim_order.out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(ops, want);
    let selected = rbuild_selective::select(&ops).unwrap();
    assert_eq!(selected.len(), ops.len());
    let src = rbuild_selective::kernels_rs(&selected);
    assert!(src.contains("kernel: rbuild_kernels::optimized::conv::convolution_out"), "{src}");
}

#[test]
fn every_missing_kernel_is_listed() {
    let ops: BTreeSet<String> = ["aten::add.out", "aten::_fft_r2c.out", "nope::thing.out"].iter().map(|s| s.to_string()).collect();
    let e = rbuild_selective::select(&ops).unwrap_err();
    assert_eq!(e.0, ["aten::_fft_r2c.out", "nope::thing.out"]);
    assert!(e.to_string().contains("2 operator(s)"));
}
