// `layer_norm` / `rms_norm` over the last dim: one 256-thread block per row; twin of norm.wgsl.
// Params: 0 rows, 1 D, 2 mode (0 layer norm, 1 affine layer norm, 2 rms norm), 3 dtype X,
// 4 dtype W, 5 dtype BIAS, 6 dtype OUT, 7 eps (f32 bits).

RB_KERNEL rb_norm(const u32* P, const u32* GATE, const u32* X, const u32* W, const u32* BIAS, u32* OUT) {
    RB_GATED
    __shared__ float red[256];
    u32 row = blockIdx.y * gridDim.x + blockIdx.x;
    if (row >= P[0]) return;
    u32 lid = threadIdx.x, d = P[1], mode = P[2], dx = P[3], base = row * d;
    if (mode == 2u) {
        float ss = 0.0f;
        for (u32 c = lid; c < d; c += 256u) { float v = ld(X, base + c, dx); ss += v * v; }
        float r = 1.0f / sqrtf(block_reduce<256>(red, lid, ss, false) / (float)d + pf(P, 7u));
        for (u32 c = lid; c < d; c += 256u) st(OUT, base + c, ld(W, c, P[4]) * (ld(X, base + c, dx) * r), P[6]);
        return;
    }
    float s = 0.0f;
    for (u32 c = lid; c < d; c += 256u) s += ld(X, base + c, dx);
    float mean = block_reduce<256>(red, lid, s, false) / (float)d;
    float q = 0.0f;
    for (u32 c = lid; c < d; c += 256u) { float v = ld(X, base + c, dx) - mean; q += v * v; }
    float rstd = 1.0f / sqrtf(block_reduce<256>(red, lid, q, false) / (float)d + pf(P, 7u));
    for (u32 c = lid; c < d; c += 256u) {
        float v = (ld(X, base + c, dx) - mean) * rstd;
        if (mode == 1u) v = v * ld(W, c, P[4]) + ld(BIAS, c, P[5]);
        st(OUT, base + c, v, P[6]);
    }
}
