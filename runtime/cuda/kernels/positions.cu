// `positions`: out[i] = POS[0] + i (i32 words); twin of positions.wgsl.
// Params: 0 n, 1 op index.

RB_KERNEL rb_positions(const u32* P, const u32* GATE, const u32* POS, u32* OUT, u32* STATUS) {
    RB_GATED
    u32 i = flat_256();
    if (i >= P[0]) return;
    int start = (int)POS[0];
    if (start < 0) {
        atomicMax(&STATUS[P[1]], 1u);
        return;
    }
    OUT[i] = (u32)(start + (int)i);
}
