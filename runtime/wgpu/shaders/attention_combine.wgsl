// Second pass of split-key attention (see attention.wgsl): merges the S partial records
// [max, sum, unnormalized output] of each (batch, query row, head) into the output, one thread
// per output element: out = Σ acc_s·e^(m_s − M) / Σ l_s·e^(m_s − M), M = max m_s.
//
// Params: 0 n outputs (B·Lq·H·Dv), 1 Dv, 2 splits S, 3 dtype OUT.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> PART: array<f32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;

fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }

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

// Two threads may write the two halves of one word: clear then set our half atomically.
fn put_half(i: u32, h: u32) {
    let sh = (i & 1u) * 16u;
    atomicAnd(&OUT[i >> 1u], ~(0xffffu << sh));
    atomicOr(&OUT[i >> 1u], h << sh);
}

fn st_out(i: u32, v: f32, dt: u32) {
    switch dt {
        case 2u: { put_half(i, f16_bits(v)); }
        case 3u: { put_half(i, bf16_bits(v)); }
        case 4u: { atomicStore(&OUT[i], bitcast<u32>(i32(v))); }
        case 6u: { atomicStore(&OUT[i], select(0u, 1u, v != 0.0)); }
        default: { atomicStore(&OUT[i], bitcast<u32>(v)); }
    }
}

fn nan() -> f32 { return bitcast<f32>(0x7fc00000u); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (o >= p(0u)) { return; }
    let dv = p(1u);
    let splits = p(2u);
    let row = o / dv;
    let c = o % dv;
    let base = row * splits * (dv + 2u);
    var mx = -3.0e38;
    for (var s = 0u; s < splits; s++) { mx = max(mx, PART[base + s * (dv + 2u)]); }
    var num = 0.0;
    var den = 0.0;
    for (var s = 0u; s < splits; s++) {
        let at = base + s * (dv + 2u);
        let w = exp(PART[at] - mx);
        den += PART[at + 1u] * w;
        num += PART[at + 2u + c] * w;
    }
    st_out(o, num / den, p(3u));
}
