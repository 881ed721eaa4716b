// `embedding`: gathers rows of a float table `[V, D]` by i32 indices; one thread per output
// element. An index outside `0..V` writes 0 and flags the op in STATUS (reported by the host).
//
// Params: 0 n (indices × D), 1 D, 2 V, 3 dtype TABLE, 4 dtype OUT, 5 op index; a quantized
// table (dtype 16 int8 / 17 int4, grouped scales in SCALES): 6 D, 7 group size, 8 dtype SCALES.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> TABLE: array<u32>;
@group(0) @binding(2) var<storage, read> IDX: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> STATUS: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> SCALES: array<u32>;

fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }

// Scale of weight element (r, col): SCALES is [rows, ceil(C / group)].
fn qscale(r: u32, col: u32) -> f32 {
    let g = p(7u);
    let groups = (p(6u) + g - 1u) / g;
    return ld_scales(r * groups + col / g, p(8u));
}

fn ld_table(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(TABLE[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((TABLE[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(TABLE[i])); }
        case 6u: { return f32(TABLE[i]); }
        case 16u: {
            let c = p(6u);
            // Sign-extend byte i % 4 with shifts (extractBits needs MSL 1.2).
            let q = bitcast<i32>(TABLE[i >> 2u] << (24u - (i & 3u) * 8u)) >> 24u;
            return f32(q) * qscale(i / c, i % c);
        }
        case 17u: {
            // int4: each row packed separately, ceil(C/2) bytes, low nibble first.
            let c = p(6u);
            let r = i / c;
            let col = i % c;
            let byte = r * ((c + 1u) / 2u) + col / 2u;
            let q = bitcast<i32>(TABLE[byte >> 2u] << (28u - (byte & 3u) * 8u - (col & 1u) * 4u)) >> 28u;
            return f32(q) * qscale(r, col);
        }
        default: { return bitcast<f32>(TABLE[i]); }
    }
}

fn ld_scales(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(SCALES[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((SCALES[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(SCALES[i])); }
        case 6u: { return f32(SCALES[i]); }
        default: { return bitcast<f32>(SCALES[i]); }
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
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    let d = p(1u);
    let row = bitcast<i32>(IDX[i / d]);
    if (row < 0 || u32(row) >= p(2u)) {
        atomicMax(&STATUS[p(5u)], 2u);
        st_out(i, 0.0, p(4u));
        return;
    }
    st_out(i, ld_table(u32(row) * d + i % d, p(3u)), p(4u));
}
