// GEMV for single-row `linear` (decode, M == 1): one workgroup of 64 threads per output
// column j; the threads stride over K (contiguous in an `[out, in]` weight) and reduce in shared
// memory. Same params and operand addressing as gemm.wgsl (batch fields unused).
//
// Params: 0 M (1), 1 N, 2 K, 3 dtype A, 4 dtype B, 5 dtype OUT, 6 has bias, 7 dtype BIAS,
// 8 A row stride, 9 A col stride, 10 B row stride, 11 B col stride; quantized B: 40 its
// columns, 41 group size, 42 dtype SCALES.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read> BIAS: array<u32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> SCALES: array<u32>;

fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }

fn ld_a(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(A[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((A[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(A[i])); }
        case 6u: { return f32(A[i]); }
        default: { return bitcast<f32>(A[i]); }
    }
}

// Scale of weight element (r, col): SCALES is [rows, ceil(C / group)].
fn qscale(r: u32, col: u32) -> f32 {
    let g = p(41u);
    let groups = (p(40u) + g - 1u) / g;
    return ld_scales(r * groups + col / g, p(42u));
}

fn ld_b(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(B[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((B[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(B[i])); }
        case 6u: { return f32(B[i]); }
        case 16u: {
            let c = p(40u);
            // Sign-extend byte i % 4 with shifts (extractBits needs MSL 1.2).
            let q = bitcast<i32>(B[i >> 2u] << (24u - (i & 3u) * 8u)) >> 24u;
            return f32(q) * qscale(i / c, i % c);
        }
        case 17u: {
            // int4: each row packed separately, ceil(C/2) bytes, low nibble first.
            let c = p(40u);
            let r = i / c;
            let col = i % c;
            let byte = r * ((c + 1u) / 2u) + col / 2u;
            let q = bitcast<i32>(B[byte >> 2u] << (28u - (byte & 3u) * 8u - (col & 1u) * 4u)) >> 28u;
            return f32(q) * qscale(r, col);
        }
        default: { return bitcast<f32>(B[i]); }
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

fn ld_bias(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(BIAS[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((BIAS[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(BIAS[i])); }
        case 6u: { return f32(BIAS[i]); }
        default: { return bitcast<f32>(BIAS[i]); }
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

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = wg.y * nwg.x + wg.x;
    // Uniform per workgroup: whole workgroups past N leave together.
    if (j >= p(1u)) { return; }
    let k = p(2u);
    var s = 0.0;
    for (var q = lid; q < k; q += 64u) {
        s += ld_a(q * p(9u), p(3u)) * ld_b(q * p(10u) + j * p(11u), p(4u));
    }
    red[lid] = s;
    workgroupBarrier();
    for (var h = 32u; h > 0u; h = h >> 1u) {
        if (lid < h) { red[lid] += red[lid + h]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        var v = red[0];
        if (p(6u) == 1u) { v += ld_bias(j, p(7u)); }
        st_out(j, v, p(5u));
    }
}
