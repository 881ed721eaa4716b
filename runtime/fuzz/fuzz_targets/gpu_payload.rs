//! Fuzzes the `RbuildGpuBackend` payload reader: arbitrary bytes must parse or be rejected
//! (never panic, never allocate beyond the input's size); whatever parses must be re-written
//! by the writer and re-read to an equal payload, and writing must be deterministic.
//! Seed: `cargo test -p rbuild-runtime --test gpu_payload -- --ignored write_fuzz_seeds`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rbuild_runtime::backends::gpu::payload::Payload;

fuzz_target!(|data: &[u8]| {
    let Ok(payload) = Payload::from_bytes(data) else { return };
    let written = payload.to_bytes().expect("the writer accepts what the reader accepted");
    let again = Payload::from_bytes(&written).expect("re-read of our own output");
    assert_eq!(again, payload);
    assert_eq!(again.to_bytes().expect("second write"), written);
});
