//! Fuzzes ExecuTorch's XNNPACK payload through rbuild's `XnnpackBackend`: arbitrary bytes must
//! decode or be rejected with a message (header, flatbuffer, cross-references), and whatever
//! decodes must compile or be rejected (shapes, dtypes, constants); a compiled plan that is
//! small enough is then run on zeros, so the kernels see the geometries the fuzzer invents.
//! Named data is a fixed pattern of bytes, so constants by key resolve and weights get packed.
//! Seeds: `cargo test -p rbuild-runtime --test xnnpack_payload -- --ignored write_fuzz_seeds`.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// 8 MiB of 0x3c: as f32 every element is 0.0115 (a valid scale), as int8 60.
fn named_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| vec![0x3c; 8 << 20])
}

fuzz_target!(|data: &[u8]| {
    let named = |_: &str| Some(named_bytes());
    // 256 MiB of activations at most: a hostile graph's huge dims must fail cleanly, not abort.
    let Ok(mut plan) = rbuild_kernels::xnnpack::compile_payload(data, &named, 256 << 20) else { return };
    if plan.activation_elements() <= 1 << 20 {
        let _ = plan.run_in_place(1);
    }
});
