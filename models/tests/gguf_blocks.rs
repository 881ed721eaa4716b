//! A GGUF file's linears kept as blocks equal, dequantized, the float32 weights the import
//! reads from the same file (un-permuted the same way). Uses the file in `RBUILD_GGUF` (a
//! real model, e.g. SmolLM2's Q4_1 GGUF); skips with a notice without it.

#[test]
fn kept_blocks_dequantize_to_the_imported_float_weights() {
    let Ok(path) = std::env::var("RBUILD_GGUF") else {
        eprintln!("skipped: set RBUILD_GGUF to a GGUF file");
        return;
    };
    let (_, w) = rbuild_models::llama::open_checkpoint(std::path::Path::new(&path)).unwrap();
    assert!(!w.prequantized.is_empty());
    for (name, q) in w.prequantized.iter() {
        let float = w.f32s(name, &[q.rows, q.cols]).unwrap();
        let blocks = q.dequantize();
        let worst = float.iter().zip(&blocks).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-6, "{name}: blocks differ from the float weights by {worst}");
    }
    eprintln!("{} block weights checked", w.prequantized.len());
}
