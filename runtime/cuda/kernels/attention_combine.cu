// Second pass of split-key attention: merges the S partial records [max, sum, unnormalized
// output] of each (batch, query row, head); one thread per output element; twin of
// attention_combine.wgsl.
// Params: 0 n outputs (B·Lq·H·Dv), 1 Dv, 2 splits S, 3 dtype OUT.

RB_KERNEL rb_attention_combine(const u32* P, const u32* GATE, const float* PART, u32* OUT) {
    RB_GATED
    u32 o = flat_256();
    if (o >= P[0]) return;
    u32 dv = P[1], splits = P[2], row = o / dv, c = o % dv;
    u32 base = row * splits * (dv + 2u);
    float mx = -3.0e38f;
    for (u32 s = 0u; s < splits; s++) mx = fmaxf(mx, PART[base + s * (dv + 2u)]);
    float num = 0.0f, den = 0.0f;
    for (u32 s = 0u; s < splits; s++) {
        u32 at = base + s * (dv + 2u);
        float w = expf(PART[at] - mx);
        den += PART[at + 1u] * w;
        num += PART[at + 2u + c] * w;
    }
    st(OUT, o, num / den, P[3]);
}
