// `softmax` along one dim: one 256-thread block per line of n elements `inner` apart; twin of
// softmax.wgsl.
// Params: 0 lines (outer × inner), 1 n, 2 inner, 3 dtype X, 4 dtype OUT.

RB_KERNEL rb_softmax(const u32* P, const u32* GATE, const u32* X, u32* OUT) {
    RB_GATED
    __shared__ float red[256];
    u32 line = blockIdx.y * gridDim.x + blockIdx.x;
    if (line >= P[0]) return;
    u32 lid = threadIdx.x, n = P[1], inner = P[2], dx = P[3];
    u32 base = (line / inner) * n * inner + line % inner;
    float m = -3.0e38f;
    for (u32 k = lid; k < n; k += 256u) m = fmaxf(m, ld(X, base + k * inner, dx));
    m = block_reduce<256>(red, lid, m, true);
    float s = 0.0f;
    for (u32 k = lid; k < n; k += 256u) s += expf(ld(X, base + k * inner, dx) - m);
    float inv = 1.0f / block_reduce<256>(red, lid, s, false);
    for (u32 k = lid; k < n; k += 256u) st(OUT, base + k * inner, expf(ld(X, base + k * inner, dx) - m) * inv, P[4]);
}
