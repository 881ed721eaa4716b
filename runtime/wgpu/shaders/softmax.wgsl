// `softmax` along one dim: one workgroup of 256 threads per (outer, inner) line of `n`
// elements `inner` apart; max, then the sum of exponentials, in shared memory.
//
// Params: 0 lines (outer × inner), 1 n, 2 inner, 3 dtype X, 4 dtype OUT.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;

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
    let line = wg.y * nwg.x + wg.x;
    if (line >= p(0u)) { return; }
    let n = p(1u);
    let inner = p(2u);
    let base = (line / inner) * n * inner + line % inner;
    let dx = p(3u);
    // A finite floor rather than -inf: Metal compiles with fast math, which assumes no infinities.
    var m = -3.0e38;
    for (var k = lid; k < n; k += 256u) { m = max(m, ld_x(base + k * inner, dx)); }
    m = reduce(lid, m, true);
    var s = 0.0;
    for (var k = lid; k < n; k += 256u) { s += exp(ld_x(base + k * inner, dx) - m); }
    let inv = 1.0 / reduce(lid, s, false);
    for (var k = lid; k < n; k += 256u) {
        st_out(base + k * inner, exp(ld_x(base + k * inner, dx) - m) * inv, p(4u));
    }
}
