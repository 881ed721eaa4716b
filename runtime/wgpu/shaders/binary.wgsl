// Elementwise binary ops with NumPy broadcasting up to rank 8 (the payload's `binary`).
// One thread per output element; float ops in f32, integer ops on i32 words (wrapping).
//
// Params: 0 n, 1 op (0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow), 2 rank, 3 dtype A,
// 4 dtype B, 5 dtype OUT, 6 integer mode; 8..16 output dims, 16..24 A strides, 24..32 B strides
// (0 where broadcast).
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;

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

fn ld_b(i: u32, dt: u32) -> f32 {
    switch dt {
        case 2u: { return unpack2x16float(B[i >> 1u])[i & 1u]; }
        case 3u: { return bitcast<f32>(((B[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }
        case 4u: { return f32(bitcast<i32>(B[i])); }
        case 6u: { return f32(B[i]); }
        default: { return bitcast<f32>(B[i]); }
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

// pow as C's powf for the cases WGSL leaves undefined (x <= 0).
fn pow_(x: f32, y: f32) -> f32 {
    if (y == 0.0) { return 1.0; }
    if (x != x || y != y) { return nan(); }
    if (x == 0.0) { return select(0.0, bitcast<f32>(0x7f800000u), y < 0.0); }
    if (x < 0.0) {
        if (floor(y) != y) { return nan(); }
        let m = pow(-x, y);
        return select(m, -m, abs(y % 2.0) == 1.0);
    }
    return pow(x, y);
}

fn fop(op: u32, a: f32, b: f32) -> f32 {
    switch op {
        case 0u: { return a + b; }
        case 1u: { return a - b; }
        case 2u: { return a * b; }
        case 3u: { return a / b; }
        case 4u: { if (a != a || b != b) { return nan(); } return max(a, b); }
        case 5u: { if (a != a || b != b) { return nan(); } return min(a, b); }
        default: { return pow_(a, b); }
    }
}

fn iop(op: u32, a: i32, b: i32) -> i32 {
    switch op {
        case 0u: { return a + b; }
        case 1u: { return a - b; }
        case 2u: { return a * b; }
        case 4u: { return max(a, b); }
        default: { return min(a, b); }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    let rank = p(2u);
    for (var k = 0u; k < rank; k++) {
        let d = rank - 1u - k;
        let n = p(8u + d);
        let c = rem % n;
        rem = rem / n;
        ia += c * p(16u + d);
        ib += c * p(24u + d);
    }
    if (p(6u) == 1u) {
        atomicStore(&OUT[i], bitcast<u32>(iop(p(1u), bitcast<i32>(A[ia]), bitcast<i32>(B[ib]))));
    } else {
        st_out(i, fop(p(1u), ld_a(ia, p(3u)), ld_b(ib, p(4u))), p(5u));
    }
}
