// Tiled GEMM for `linear` (M > 1) and batched `matmul`: C[b] = A[b] @ B[b] (+ bias), operands
// addressed through row/column strides; twin of gemm.wgsl. A 16×16 block computes a 64×64 tile
// of C (4×4 per thread) from 64×16 / 16×64 tiles of A and B in shared memory.
// Params: 0 M, 1 N, 2 K, 3 dtype A, 4 dtype B, 5 dtype OUT, 6 has bias, 7 dtype BIAS,
// 8 A row stride, 9 A col stride, 10 B row stride, 11 B col stride, 12 batch rank (<= 6);
// 16..22 batch dims, 24..30 A batch strides, 32..38 B batch strides; quantized B: 40 its
// columns, 41 group size, 42 dtype SCALES.

RB_KERNEL rb_gemm(const u32* P, const u32* GATE, const u32* A, const u32* B, const u32* BIAS, u32* OUT,
                  const u32* SCALES) {
    RB_GATED
    __shared__ float ta[1024]; // [64 rows][16 k]
    __shared__ float tb[1024]; // [16 k][64 cols]
    u32 m = P[0], n = P[1], k = P[2];
    u32 lx = threadIdx.x, ly = threadIdx.y, lid = ly * 16u + lx;
    u32 rem = blockIdx.z, a0 = 0u, b0 = 0u, br = P[12];
    for (u32 q = 0u; q < br; q++) {
        u32 d = br - 1u - q;
        u32 c = rem % P[16u + d];
        rem /= P[16u + d];
        a0 += c * P[24u + d];
        b0 += c * P[32u + d];
    }
    u32 row0 = blockIdx.y * 64u, col0 = blockIdx.x * 64u;
    float acc[16];
    for (int t = 0; t < 16; t++) acc[t] = 0.0f;
    for (u32 k0 = 0u; k0 < k; k0 += 16u) {
        for (u32 e = lid; e < 1024u; e += 256u) {
            u32 r = e / 16u, kk = e % 16u;
            float va = 0.0f;
            if (row0 + r < m && k0 + kk < k) va = ld(A, a0 + (row0 + r) * P[8] + (k0 + kk) * P[9], P[3]);
            ta[e] = va;
            u32 kb = e / 64u, cb = e % 64u;
            float vb = 0.0f;
            if (k0 + kb < k && col0 + cb < n) vb = ld_weight(B, SCALES, P, 40u, b0 + (k0 + kb) * P[10] + (col0 + cb) * P[11], P[4]);
            tb[e] = vb;
        }
        __syncthreads();
        for (u32 kk = 0u; kk < 16u; kk++) {
            float av[4], bv[4];
            for (u32 t = 0u; t < 4u; t++) {
                av[t] = ta[(ly + 16u * t) * 16u + kk];
                bv[t] = tb[kk * 64u + lx + 16u * t];
            }
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) acc[r * 4 + c] += av[r] * bv[c];
        }
        __syncthreads();
    }
    u32 out0 = blockIdx.z * m * n;
    for (u32 r = 0u; r < 4u; r++) {
        u32 row = row0 + ly + 16u * r;
        for (u32 c = 0u; c < 4u; c++) {
            u32 col = col0 + lx + 16u * c;
            if (row < m && col < n) {
                float v = acc[r * 4u + c];
                if (P[6] == 1u) v += ld(BIAS, col, P[7]);
                st(OUT, out0 + row * n + col, v, P[5]);
            }
        }
    }
}
