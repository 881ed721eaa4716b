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
    let ops: BTreeSet<String> = ["aten::add.out", "aten::not_an_op.out", "nope::thing.out"].iter().map(|s| s.to_string()).collect();
    let e = rbuild_selective::select(&ops).unwrap_err();
    assert_eq!(e.0, ["aten::not_an_op.out", "nope::thing.out"]);
    assert!(e.to_string().contains("2 operator(s)"));
}

/// A program holding a complex tensor lists the `dtype::complex` pseudo-op (the kernels'
/// `complex` feature); MobileNetV2 does not.
#[test]
fn complex_tensors_are_listed_as_a_dtype_selection() {
    use rbuild_runtime::format::schema::KernelTypes;
    use rbuild_runtime::format::{write_pte, PteFile};
    let pte = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/bad/base.pte")).unwrap();
    let ops = rbuild_selective::program_ops(&pte).unwrap();
    assert!(!ops.contains(rbuild_selective::COMPLEX_DTYPES), "{ops:?}");
    // The same program with its first tensor made complex64.
    let file = PteFile::parse(&pte).unwrap();
    let mut program = file.program.clone();
    let values = program.execution_plan.as_mut().unwrap()[0].values.as_mut().unwrap();
    let first = values.iter_mut().find_map(|v| match &mut v.val {
        Some(KernelTypes::Tensor(t)) => Some(t),
        _ => None,
    });
    first.unwrap().scalar_type = 9;
    let segments: Vec<&[u8]> = (0..file.segments().len()).map(|i| file.segment(i).unwrap()).collect();
    let complex = write_pte(&program, &segments);
    let ops = rbuild_selective::program_ops(&complex).unwrap();
    assert!(ops.contains(rbuild_selective::COMPLEX_DTYPES), "{ops:?}");
    let selected = rbuild_selective::select(&ops).unwrap();
    assert!(selected.iter().any(|(op, feature)| op == rbuild_selective::COMPLEX_DTYPES && feature == "complex"));
}
