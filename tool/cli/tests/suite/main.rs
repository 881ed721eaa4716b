//! Every end-to-end test of the `rbuild` CLI in one test binary: one link of the tool tree
//! instead of one per file, and the long recipe builds of different modules run side by side
//! (cargo's test threads) while one of them waits on qemu, Python or a single-threaded step.
//! Run one module with a filter: `cargo test -p rbuild --test suite whisper_recipe`.

mod common;

mod bad_inputs;
mod cross_verify;
mod eval;
mod ethosu_recipe;
mod executorch_roundtrip;
mod export_models;
mod export_ops_oracle;
mod firmware;
mod gguf;
mod inspect_pt2;
mod int8_ops_oracle;
mod int8_static;
mod llm_recipe;
mod ops_coverage;
mod portable_exactness;
mod pt2_import;
mod placement;
mod pt2_recipe;
mod pte_recipe;
mod quant_embedding_oracle;
mod recipe_build;
mod recipe_plans;
mod recipe_sizes;
mod testdata_cases;
mod testdata_reexport;
mod voxtral_cuda_recipe;
mod voxtral_recipe;
mod whisper_en;
mod whisper_export;
mod whisper_gpu_recipe;
mod whisper_recipe;
mod xnnpack_export;
mod xnnpack_recipe;
