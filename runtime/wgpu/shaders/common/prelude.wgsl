// Shared helpers of every kernel. WGSL has no includes, so shaders.rs compiles each kernel as
// this file + the kernel's common/ extras + the kernel file (the portability test validates that
// same text). Nothing here names a kernel's storage bindings: loads take the word the kernel
// read (`decode(X[word_of(i, dt)], i, dt)`) and stores return where and what to write
// (`put_of`), so each kernel keeps a one-line `ld_*` per buffer and a short `st_out` (WGSL cannot
// pass a storage array to a function without `ptr<storage>` parameters, which old MSL targets
// lack).
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;

// Parameter word i, and the same as f32 bits.
fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }

fn nan() -> f32 { return bitcast<f32>(0x7fc00000u); }

// The u32 word holding element i of a dtype-dt buffer (f16/bf16: two halves per word).
fn word_of(i: u32, dt: u32) -> u32 { return select(i, i >> 1u, dt == 2u || dt == 3u); }

// Element i of a dtype-dt buffer as f32, from its word `w` (the buffer at `word_of(i, dt)`).
fn decode(w: u32, i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(w)[i & 1u]; }
        case 3u: { return bitcast<f32>(((w >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(w)); }
        case 6u: { return f32(w); }
        default: { return bitcast<f32>(w); }
    }
}

// f32 -> f16 bits, round to nearest even; overflow gives inf and NaN stays NaN (pack2x16float
// leaves out-of-range values indeterminate).
fn f16_bits(v: f32) -> u32 {
    if (v != v) { return 0x7e00u; }
    if (abs(v) >= 65520.0) { return select(0x7c00u, 0xfc00u, v < 0.0); }
    return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu;
}

fn bf16_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (v != v) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

// How element i of a dtype-dt output receives v: word `at` gets `bits`. keep == 0: the whole
// word (atomicStore). Otherwise a half (f16/bf16): two threads may write the two halves of one
// word, so the kernel clears its half (atomicAnd with `keep`) then sets it (atomicOr `bits`).
struct Put { at: u32, keep: u32, bits: u32 }

fn put_of(i: u32, v: f32, dt: u32) -> Put {
    let sh = (i & 1u) * 16u;
    switch dt {
        case 2u: { return Put(i >> 1u, ~(0xffffu << sh), f16_bits(v) << sh); }
        case 3u: { return Put(i >> 1u, ~(0xffffu << sh), bf16_bits(v) << sh); }
        case 4u: { return Put(i, 0u, bitcast<u32>(i32(v))); }
        case 6u: { return Put(i, 0u, select(0u, 1u, v != 0.0)); }
        default: { return Put(i, 0u, bitcast<u32>(v)); }
    }
}
