// `rope`: rotary embedding of `x [B, L, H, D]`, positions `POS[0] + l` read on the device.
// One thread per rotated pair. Pairs are (2i, 2i+1) when interleaved, else (i, i + D/2); the
// angle of pair i at position p is p · theta^(-2i/D).
//
// Accuracy: the angle is reduced to turns exactly enough for long contexts. FREQ holds, per
// pair, g = theta^(-2i/D) / 2π (computed in f64 on the host) split as g0 + g1 + g2 with g0 and
// g1 of 12 significant bits each; with p = ph + pl (pl = its low 12 bits) every product of ph or
// pl with g0 or g1 is exact in f32, so their fractional parts are exact, and only p·g2 (about
// 2^-24 of the angle) rounds. sin/cos then see an argument in [-π, π]. Positions below 2^24.
//
// Params: 0 pairs (B·L·H·D/2), 1 L, 2 H, 3 D, 4 interleaved, 5 unused, 6 dtype X, 7 dtype OUT,
// 8 op index.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read> POS: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> STATUS: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> FREQ: array<f32>;

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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (t >= p(0u)) { return; }
    let d = p(3u);
    let half = d / 2u;
    let row = t / half;
    let i = t % half;
    let start = bitcast<i32>(POS[0]);
    if (start < 0) {
        atomicMax(&STATUS[p(8u)], 1u);
        return;
    }
    let pos = u32(start) + (row / p(2u)) % p(1u);
    let pl = pos & 0xfffu;
    let ph = pos - pl;
    let g0 = FREQ[3u * i];
    let g1 = FREQ[3u * i + 1u];
    let g2 = FREQ[3u * i + 2u];
    let fh = f32(ph);
    let fl = f32(pl);
    let exact = (fract(fh * g0) + fract(fl * g0)) + (fract(fh * g1) + fract(fl * g1));
    let turns_raw = fract(exact) + fract(f32(pos) * g2);
    var turns = fract(turns_raw);
    if (turns > 0.5) { turns -= 1.0; }
    let a = turns * 6.283185307179586;
    let c = cos(a);
    let s = sin(a);
    var i0 = row * d + i;
    var i1 = i0 + half;
    if (p(4u) == 1u) {
        i0 = row * d + 2u * i;
        i1 = i0 + 1u;
    }
    let x0 = ld_x(i0, p(6u));
    let x1 = ld_x(i1, p(6u));
    st_out(i0, x0 * c - x1 * s, p(7u));
    st_out(i1, x1 * c + x0 * s, p(7u));
}
