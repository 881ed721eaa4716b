// `layer_norm` and `rms_norm` over the last dim: one workgroup of 256 threads per row,
// reductions in shared memory (layer norm: mean, then the centered sum of squares).
//
// Params: 0 rows, 1 D, 2 mode (0 layer norm, 1 affine layer norm, 2 rms norm), 3 dtype X,
// 4 dtype W, 5 dtype BIAS, 6 dtype OUT, 7 eps (f32 bits).
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

var<workgroup> red: array<f32, 256>;

// Workgroup-wide sum (max when `is_max`) of each thread's `v`; every thread gets the result.
fn reduce(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let o = red[lid + s];
            red[lid] = select(red[lid] + o, max(red[lid], o), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wg.y * nwg.x + wg.x;
    if (row >= p(0u)) { return; }
    let d = p(1u);
    let mode = p(2u);
    let dx = p(3u);
    let base = row * d;
    if (mode == 2u) {
        var ss = 0.0;
        for (var c = lid; c < d; c += 256u) { let v = ld_x(base + c, dx); ss += v * v; }
        let r = 1.0 / sqrt(reduce(lid, ss, false) / f32(d) + pf(7u));
        for (var c = lid; c < d; c += 256u) {
            st_out(base + c, ld_w(c, p(4u)) * (ld_x(base + c, dx) * r), p(6u));
        }
        return;
    }
    var s = 0.0;
    for (var c = lid; c < d; c += 256u) { s += ld_x(base + c, dx); }
    let mean = reduce(lid, s, false) / f32(d);
    var q = 0.0;
    for (var c = lid; c < d; c += 256u) { let v = ld_x(base + c, dx) - mean; q += v * v; }
    let rstd = 1.0 / sqrt(reduce(lid, q, false) / f32(d) + pf(7u));
    for (var c = lid; c < d; c += 256u) {
        var v = (ld_x(base + c, dx) - mean) * rstd;
        if (mode == 1u) { v = v * ld_w(c, p(4u)) + ld_bias(c, p(5u)); }
        st_out(base + c, v, p(6u));
    }
}
