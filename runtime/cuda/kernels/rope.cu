// `rope`: rotary embedding of x [B, L, H, D] at positions POS[0] + l read on the device; one
// thread per rotated pair; twin of rope.wgsl, with its exact angle reduction (FREQ holds
// theta^(-2i/D) / 2π per pair split in three parts, see rope.wgsl).
// Params: 0 pairs, 1 L, 2 H, 3 D, 4 interleaved, 5 unused, 6 dtype X, 7 dtype OUT, 8 op index.

RB_KERNEL rb_rope(const u32* P, const u32* GATE, const u32* X, const u32* POS, u32* OUT, u32* STATUS,
                  const float* FREQ) {
    RB_GATED
    u32 t = flat_256();
    if (t >= P[0]) return;
    u32 d = P[3], half = d / 2u, row = t / half, i = t % half;
    int start = (int)POS[0];
    if (start < 0) {
        atomicMax(&STATUS[P[8]], 1u);
        return;
    }
    u32 pos = (u32)start + (row / P[2]) % P[1];
    u32 pl = pos & 0xfffu, ph = pos - pl;
    float g0 = FREQ[3u * i], g1 = FREQ[3u * i + 1u], g2 = FREQ[3u * i + 2u];
    float fh = (float)ph, fl = (float)pl;
    // No FMA contraction: each product must round on its own for the reduction to be exact.
    float exact = (rb_fract(__fmul_rn(fh, g0)) + rb_fract(__fmul_rn(fl, g0))) +
                  (rb_fract(__fmul_rn(fh, g1)) + rb_fract(__fmul_rn(fl, g1)));
    float turns = rb_fract(rb_fract(exact) + rb_fract(__fmul_rn((float)pos, g2)));
    if (turns > 0.5f) turns -= 1.0f;
    float a = turns * 6.283185307179586f;
    float c = cosf(a), s = sinf(a);
    u32 i0 = row * d + i, i1 = i0 + half;
    if (P[4] == 1u) {
        i0 = row * d + 2u * i;
        i1 = i0 + 1u;
    }
    float x0 = ld(X, i0, P[6]), x1 = ld(X, i1, P[6]);
    st(OUT, i0, x0 * c - x1 * s, P[7]);
    st(OUT, i1, x1 * c + x0 * s, P[7]);
}
