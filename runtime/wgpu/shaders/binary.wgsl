// Elementwise binary ops with NumPy broadcasting up to rank 8 (the payload's `binary`).
// One thread per output element; float ops in f32, integer ops on i32 words (wrapping).
//
// Params: 0 n, 1 op (0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow), 2 rank, 3 dtype A,
// 4 dtype B, 5 dtype OUT, 6 integer mode; 8..16 output dims, 16..24 A strides, 24..32 B strides
// (0 where broadcast).
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;

fn ld_a(i: u32, dt: u32) -> f32 { return decode(A[word_of(i, dt)], i, dt); }

fn ld_b(i: u32, dt: u32) -> f32 { return decode(B[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

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
