// `conv1d`: x [N, Cin, L], w [Cout, Cin/groups, K], optional bias; one thread per output
// element, a direct sum; twin of conv1d.wgsl.
// Params: 0 n outputs, 1 Cin, 2 L, 3 Cout, 4 K, 5 Lout, 6 stride, 7 padding, 8 dilation,
// 9 groups, 10 has bias, 11 dtype X, 12 dtype W, 13 dtype BIAS, 14 dtype OUT.

RB_KERNEL rb_conv1d(const u32* P, const u32* GATE, const u32* X, const u32* W, const u32* BIAS, u32* OUT) {
    RB_GATED
    u32 o = flat_256();
    if (o >= P[0]) return;
    u32 cin = P[1], l = P[2], cout = P[3], k = P[4], lout = P[5];
    u32 t = o % lout, co = (o / lout) % cout, n = o / (lout * cout);
    u32 cig = cin / P[9];
    u32 g = co / (cout / P[9]);
    float acc = 0.0f;
    for (u32 ci = 0u; ci < cig; ci++) {
        u32 xrow = (n * cin + g * cig + ci) * l;
        u32 wrow = (co * cig + ci) * k;
        for (u32 kk = 0u; kk < k; kk++) {
            int at = (int)(t * P[6] + kk * P[8]) - (int)P[7];
            if (at >= 0 && (u32)at < l) acc += ld(X, xrow + (u32)at, P[11]) * ld(W, wrow + kk, P[12]);
        }
    }
    if (P[10] == 1u) acc += ld(BIAS, co, P[13]);
    st(OUT, o, acc, P[14]);
}
