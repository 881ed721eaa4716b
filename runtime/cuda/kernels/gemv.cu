// GEMV for single-row `linear` (decode, M == 1): one 64-thread block per output column j, the
// threads striding over K (contiguous in an [out, in] weight), reduced with warp shuffles then
// across the two warps; twin of gemv.wgsl (same params and addressing). Weight-only int8/int4
// weights are dequantized in the loop, so decode reads each weight byte once.
// Params: 0 M (1), 1 N, 2 K, 3 dtype A, 4 dtype B, 5 dtype OUT, 6 has bias, 7 dtype BIAS,
// 8 A row stride, 9 A col stride, 10 B row stride, 11 B col stride; quantized B: 40 its
// columns, 41 group size, 42 dtype SCALES.

RB_KERNEL rb_gemv(const u32* P, const u32* GATE, const u32* A, const u32* B, const u32* BIAS, u32* OUT,
                  const u32* SCALES) {
    RB_GATED
    __shared__ float red[2];
    u32 j = blockIdx.y * gridDim.x + blockIdx.x;
    if (j >= P[1]) return;
    u32 lid = threadIdx.x, k = P[2];
    float s = 0.0f;
    for (u32 q = lid; q < k; q += 64u) s += ld(A, q * P[9], P[3]) * ld_weight(B, SCALES, P, 40u, q * P[10] + j * P[11], P[4]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((lid & 31u) == 0u) red[lid >> 5] = s;
    __syncthreads();
    if (lid == 0u) {
        float v = red[0] + red[1];
        if (P[6] == 1u) v += ld(BIAS, j, P[7]);
        st(OUT, j, v, P[5]);
    }
}
