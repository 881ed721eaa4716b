// Fused scaled dot-product attention (`attention`): one workgroup of 64 threads per
// (batch, query row, head). Keys are visited in chunks of 64 with an online softmax (running max
// and sum), so any number of keys fits; grouped-query heads share K/V head `h / (H / Hkv)`.
// With a position (read on the device) row i attends keys `0..pos+i+1` (causal) or
// `0..pos+Lq`; without, `0..min(i+1, Lk)` (causal) or all `Lk`.
//
// Split keys (few query rows, long caches, e.g. decode): with S = params[15] > 1 the keys of a
// row are cut into S ranges handled by S workgroups (z = b·S + s), each writing its running max,
// sum and unnormalized output to PART; attention_combine.wgsl merges them.
//
// Params: 0 B, 1 Lq, 2 H, 3 Hkv, 4 D, 5 Lk, 6 causal, 7 has position, 8 scale (f32 bits),
// 9 dtype Q, 10 dtype K, 11 dtype V, 12 dtype OUT, 13 op index, 14 Dv (<= 512), 15 splits S.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> Q: array<u32>;
@group(0) @binding(2) var<storage, read> K: array<u32>;
@group(0) @binding(3) var<storage, read> V: array<u32>;
@group(0) @binding(4) var<storage, read> POS: array<u32>;
@group(0) @binding(5) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> STATUS: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read_write> PART: array<f32>;

fn ld_q(i: u32, dt: u32) -> f32 { return decode(Q[word_of(i, dt)], i, dt); }

fn ld_k(i: u32, dt: u32) -> f32 { return decode(K[word_of(i, dt)], i, dt); }

fn ld_v(i: u32, dt: u32) -> f32 { return decode(V[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

var<workgroup> qs: array<f32, 512>;
var<workgroup> ps: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

fn reduce64(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
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

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let i = wg.y;
    let splits = max(p(15u), 1u);
    let b = wg.z / splits;
    let split = wg.z % splits;
    let lq = p(1u);
    let nh = p(2u);
    let hkv = p(3u);
    let d = p(4u);
    let lk = p(5u);
    let dv = p(14u);
    let kh = h / (nh / hkv);
    var n = lk;
    if (p(7u) == 1u) {
        let pos = bitcast<i32>(POS[0]);
        // Uniform across the workgroup, so the early return keeps barriers uniform.
        if (pos < 0 || u32(pos) + lq > lk) {
            if (lid == 0u) { atomicMax(&STATUS[p(13u)], 1u); }
            return;
        }
        n = select(u32(pos) + lq, u32(pos) + i + 1u, p(6u) == 1u);
    } else if (p(6u) == 1u) {
        n = min(i + 1u, lk);
    }
    let qo = ((b * lq + i) * nh + h) * d;
    for (var c = lid; c < d; c += 64u) { qs[c] = ld_q(qo + c, p(9u)); }
    workgroupBarrier();
    let scale = pf(8u);
    // Finite floors rather than -inf: Metal compiles with fast math, which assumes no
    // infinities; exp(floor - max) still underflows to 0.
    var m = -3.0e38;
    var l = 0.0;
    var acc: array<f32, 8>;
    for (var r = 0u; r < 8u; r++) { acc[r] = 0.0; }
    // This workgroup's keys: all of 0..n, or its share of them when split.
    let per = (n + splits - 1u) / splits;
    let k_begin = min(split * per, n);
    let k_end = min(k_begin + per, n);
    for (var c0 = k_begin; c0 < k_end; c0 += 64u) {
        let j = c0 + lid;
        var s = -3.0e38;
        if (j < k_end) {
            let ko = ((b * lk + j) * hkv + kh) * d;
            var dot = 0.0;
            for (var c = 0u; c < d; c++) { dot += qs[c] * ld_k(ko + c, p(10u)); }
            s = dot * scale;
        }
        let m_new = max(m, reduce64(lid, s, true));
        let corr = exp(m - m_new);
        var e = 0.0;
        if (j < k_end) { e = exp(s - m_new); }
        ps[lid] = e;
        l = l * corr + reduce64(lid, e, false);
        m = m_new;
        let cnt = min(64u, k_end - c0);
        for (var r = 0u; r < 8u; r++) {
            let c = lid + r * 64u;
            if (c < dv) {
                var a = acc[r] * corr;
                for (var t = 0u; t < cnt; t++) {
                    a += ps[t] * ld_v(((b * lk + c0 + t) * hkv + kh) * dv + c, p(11u));
                }
                acc[r] = a;
            }
        }
        workgroupBarrier();
    }
    if (splits > 1u) {
        // Partial record [max, sum, acc[0..dv]] of (b, i, h, split).
        let at = (((b * lq + i) * nh + h) * splits + split) * (dv + 2u);
        if (lid == 0u) {
            PART[at] = m;
            PART[at + 1u] = l;
        }
        for (var r = 0u; r < 8u; r++) {
            let c = lid + r * 64u;
            if (c < dv) { PART[at + 2u + c] = acc[r]; }
        }
        return;
    }
    let oo = ((b * lq + i) * nh + h) * dv;
    for (var r = 0u; r < 8u; r++) {
        let c = lid + r * 64u;
        if (c < dv) { st_out(oo + c, acc[r] / l, p(12u)); }
    }
}
