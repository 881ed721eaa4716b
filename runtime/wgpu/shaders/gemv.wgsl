// GEMV for single-row `linear` (decode, M == 1): one workgroup of 64 threads per output
// column j; the threads stride over K (contiguous in an `[out, in]` weight) and reduce in shared
// memory. Same params and operand addressing as gemm.wgsl (batch fields unused).
//
// Params: 0 M (1), 1 N, 2 K, 3 dtype A, 4 dtype B, 5 dtype OUT, 6 has bias, 7 dtype BIAS,
// 8 A row stride, 9 A col stride, 10 B row stride, 11 B col stride; quantized B: 40 its
// columns, 41 group size, 42 dtype SCALES.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read> BIAS: array<u32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> SCALES: array<u32>;

fn ld_a(i: u32, dt: u32) -> f32 { return decode(A[word_of(i, dt)], i, dt); }

// Quantized dtypes through common/quant.wgsl: columns p(40), group size p(41), scales dtype p(42).
fn ld_b(i: u32, dt: u32) -> f32 {
    if (is_quant(dt)) {
        let c = p(40u);
        return q_value(B[q_word(i, c, dt)], i, c, dt) * ld_scales(q_scale_at(i, c, p(41u)), p(42u));
    }
    return decode(B[word_of(i, dt)], i, dt);
}

fn ld_scales(i: u32, dt: u32) -> f32 { return decode(SCALES[word_of(i, dt)], i, dt); }

fn ld_bias(i: u32, dt: u32) -> f32 { return decode(BIAS[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

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
