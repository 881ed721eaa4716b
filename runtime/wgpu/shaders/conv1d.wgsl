// `conv1d`: `x [N, Cin, L]`, `w [Cout, Cin/groups, K]`, optional bias; one thread per output
// element `(n, co, t)`, a direct sum over `Cin/groups × K` taps.
//
// Params: 0 n outputs, 1 Cin, 2 L, 3 Cout, 4 K, 5 Lout, 6 stride, 7 padding, 8 dilation,
// 9 groups, 10 has bias, 11 dtype X, 12 dtype W, 13 dtype BIAS, 14 dtype OUT.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> BIAS: array<u32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<atomic<u32>>;

fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }

fn ld_x(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(X[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((X[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(X[i])); }
        case 6u: { return f32(X[i]); }
        default: { return bitcast<f32>(X[i]); }
    }
}

fn ld_w(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(W[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((W[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(W[i])); }
        case 6u: { return f32(W[i]); }
        default: { return bitcast<f32>(W[i]); }
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (o >= p(0u)) { return; }
    let cin = p(1u);
    let l = p(2u);
    let cout = p(3u);
    let k = p(4u);
    let lout = p(5u);
    let t = o % lout;
    let co = (o / lout) % cout;
    let n = o / (lout * cout);
    let cig = cin / p(9u);
    let g = co / (cout / p(9u));
    var acc = 0.0;
    for (var ci = 0u; ci < cig; ci++) {
        let xrow = (n * cin + g * cig + ci) * l;
        let wrow = (co * cig + ci) * k;
        for (var kk = 0u; kk < k; kk++) {
            let at = i32(t * p(6u) + kk * p(8u)) - i32(p(7u));
            if (at >= 0 && u32(at) < l) {
                acc += ld_x(xrow + u32(at), p(11u)) * ld_w(wrow + kk, p(12u));
            }
        }
    }
    if (p(10u) == 1u) { acc += ld_bias(co, p(13u)); }
    st_out(o, acc, p(14u));
}
