// Tiled GEMM for `linear` (M > 1) and batched `matmul`: C[b] = A[b] @ B[b] (+ bias), each
// operand addressed through row/column strides, so `[out, in]` and `[in, out]` weights and
// matmul's right operand need no transposed copy. A 16×16 workgroup computes a 64×64 tile of C
// (4×4 per thread) from 64×16 / 16×64 tiles of A and B staged in shared memory.
//
// Params: 0 M, 1 N, 2 K, 3 dtype A, 4 dtype B, 5 dtype OUT, 6 has bias, 7 dtype BIAS,
// 8 A row stride, 9 A col stride, 10 B row stride, 11 B col stride, 12 batch rank (<= 6);
// 16..22 batch dims, 24..30 A batch strides, 32..38 B batch strides; a quantized B (dtype 16
// int8 / 17 int4, grouped scales in SCALES): 40 its columns, 41 group size, 42 dtype SCALES.
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

var<workgroup> ta: array<f32, 1024>; // [64 rows][16 k]
var<workgroup> tb: array<f32, 1024>; // [16 k][64 cols]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) li: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let m = p(0u);
    let n = p(1u);
    let k = p(2u);
    // Batch offsets of A and B from the output batch index (broadcast dims have stride 0).
    var rem = wg.z;
    var a0 = 0u;
    var b0 = 0u;
    let br = p(12u);
    for (var q = 0u; q < br; q++) {
        let d = br - 1u - q;
        let c = rem % p(16u + d);
        rem = rem / p(16u + d);
        a0 += c * p(24u + d);
        b0 += c * p(32u + d);
    }
    let row0 = wg.y * 64u;
    let col0 = wg.x * 64u;
    var acc: array<f32, 16>;
    for (var t = 0u; t < 16u; t++) { acc[t] = 0.0; }
    for (var k0 = 0u; k0 < k; k0 += 16u) {
        for (var e = lid; e < 1024u; e += 256u) {
            let r = e / 16u;
            let kk = e % 16u;
            var va = 0.0;
            if (row0 + r < m && k0 + kk < k) {
                va = ld_a(a0 + (row0 + r) * p(8u) + (k0 + kk) * p(9u), p(3u));
            }
            ta[e] = va;
            let kb = e / 64u;
            let cb = e % 64u;
            var vb = 0.0;
            if (k0 + kb < k && col0 + cb < n) {
                vb = ld_b(b0 + (k0 + kb) * p(10u) + (col0 + cb) * p(11u), p(4u));
            }
            tb[e] = vb;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var t = 0u; t < 4u; t++) {
                av[t] = ta[(li.y + 16u * t) * 16u + kk];
                bv[t] = tb[kk * 64u + li.x + 16u * t];
            }
            for (var r = 0u; r < 4u; r++) {
                for (var c = 0u; c < 4u; c++) { acc[r * 4u + c] += av[r] * bv[c]; }
            }
        }
        workgroupBarrier();
    }
    let out0 = wg.z * m * n;
    for (var r = 0u; r < 4u; r++) {
        let row = row0 + li.y + 16u * r;
        for (var c = 0u; c < 4u; c++) {
            let col = col0 + li.x + 16u * c;
            if (row < m && col < n) {
                var v = acc[r * 4u + c];
                if (p(6u) == 1u) { v += ld_bias(col, p(7u)); }
                st_out(out0 + row * n + col, v, p(5u));
            }
        }
    }
}
