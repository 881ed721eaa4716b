// Strided copy with dtype conversion (`permute`, `transpose`, `slice`, `cat`, `cast`, copying
// `reshape`, `cache_update` with the destination offset read on the device); twin of copy.wgsl.
// Params: 0 n, 1 rank, 2 dtype SRC, 3 dtype OUT, 4 src base, 5 dst base, 6 position mode,
// 7 pos stride, 8..16 dims, 16..24 src strides, 24..32 dst strides, 32 largest valid position,
// 33 op index (for STATUS).

RB_KERNEL rb_copy(const u32* P, const u32* GATE, const u32* SRC, u32* OUT, const u32* POS, u32* STATUS) {
    RB_GATED
    u32 i = flat_256();
    if (i >= P[0]) return;
    u32 dst = P[5];
    if (P[6] == 1u) {
        int pos = (int)POS[0];
        if (pos < 0 || (u32)pos > P[32]) {
            atomicMax(&STATUS[P[33]], 1u);
            return;
        }
        dst += (u32)pos * P[7];
    }
    u32 rem = i, src = P[4], rank = P[1];
    for (u32 k = 0u; k < rank; k++) {
        u32 d = rank - 1u - k;
        u32 n = P[8u + d];
        u32 c = rem % n;
        rem /= n;
        src += c * P[16u + d];
        dst += c * P[24u + d];
    }
    u32 ds = P[2], dd = P[3];
    if (dd <= 3u || ds <= 3u) {
        st(OUT, dst, ld(SRC, src, ds), dd);
    } else if (dd == 6u) {
        OUT[dst] = SRC[src] != 0u ? 1u : 0u;
    } else {
        OUT[dst] = SRC[src];
    }
}
