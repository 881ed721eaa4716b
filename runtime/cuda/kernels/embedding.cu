// `embedding`: gathers rows of a table [V, D] (float, or grouped int8/int4) by i32 indices;
// twin of embedding.wgsl. An index outside 0..V writes 0 and flags the op in STATUS.
// Params: 0 n (indices × D), 1 D, 2 V, 3 dtype TABLE, 4 dtype OUT, 5 op index; quantized table:
// 6 D, 7 group size, 8 dtype SCALES.

RB_KERNEL rb_embedding(const u32* P, const u32* GATE, const u32* TABLE, const u32* IDX, u32* OUT, u32* STATUS,
                       const u32* SCALES) {
    RB_GATED
    u32 i = flat_256();
    if (i >= P[0]) return;
    u32 d = P[1];
    int row = (int)IDX[i / d];
    if (row < 0 || (u32)row >= P[2]) {
        atomicMax(&STATUS[P[5]], 2u);
        st(OUT, i, 0.0f, P[4]);
        return;
    }
    st(OUT, i, ld_weight(TABLE, SCALES, P, 6u, (u32)row * d + i % d, P[3]), P[4]);
}
