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

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read> POS: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> STATUS: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> FREQ: array<f32>;

fn ld_x(i: u32, dt: u32) -> f32 { return decode(X[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

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
