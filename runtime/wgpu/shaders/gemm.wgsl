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
