// Fused scaled dot-product attention over the KV cache (`attention`): one 64-thread block per
// (batch, query row, head), keys in chunks of 64 with an online softmax; grouped-query heads
// share K/V head h / (H / Hkv); split keys over S blocks (z = b·S + s) write partial records
// to PART for rb_attention_combine. Twin of attention.wgsl: same params and masking.
// Params: 0 B, 1 Lq, 2 H, 3 Hkv, 4 D, 5 Lk, 6 causal, 7 has position, 8 scale (f32 bits),
// 9 dtype Q, 10 dtype K, 11 dtype V, 12 dtype OUT, 13 op index, 14 Dv (<= 512), 15 splits S.

RB_KERNEL rb_attention(const u32* P, const u32* GATE, const u32* Q, const u32* K, const u32* V, const u32* POS,
                       u32* OUT, u32* STATUS, float* PART) {
    RB_GATED
    __shared__ float qs[512];
    __shared__ float ps[64];
    __shared__ float red[64];
    u32 h = blockIdx.x, i = blockIdx.y, lid = threadIdx.x;
    u32 splits = P[15] > 1u ? P[15] : 1u;
    u32 b = blockIdx.z / splits, split = blockIdx.z % splits;
    u32 lq = P[1], nh = P[2], hkv = P[3], d = P[4], lk = P[5], dv = P[14];
    u32 kh = h / (nh / hkv);
    u32 n = lk;
    if (P[7] == 1u) {
        int pos = (int)POS[0];
        if (pos < 0 || (u32)pos + lq > lk) {
            if (lid == 0u) atomicMax(&STATUS[P[13]], 1u);
            return;
        }
        n = P[6] == 1u ? (u32)pos + i + 1u : (u32)pos + lq;
    } else if (P[6] == 1u) {
        n = i + 1u < lk ? i + 1u : lk;
    }
    u32 qo = ((b * lq + i) * nh + h) * d;
    for (u32 c = lid; c < d; c += 64u) qs[c] = ld(Q, qo + c, P[9]);
    __syncthreads();
    float scale = pf(P, 8u);
    float m = -3.0e38f, l = 0.0f;
    float acc[8];
    for (int r = 0; r < 8; r++) acc[r] = 0.0f;
    u32 per = (n + splits - 1u) / splits;
    u32 k_begin = split * per < n ? split * per : n;
    u32 k_end = k_begin + per < n ? k_begin + per : n;
    for (u32 c0 = k_begin; c0 < k_end; c0 += 64u) {
        u32 j = c0 + lid;
        float s = -3.0e38f;
        if (j < k_end) {
            u32 ko = ((b * lk + j) * hkv + kh) * d;
            float dot = 0.0f;
            for (u32 c = 0u; c < d; c++) dot += qs[c] * ld(K, ko + c, P[10]);
            s = dot * scale;
        }
        float m_new = fmaxf(m, block_reduce<64>(red, lid, s, true));
        float corr = expf(m - m_new);
        float e = j < k_end ? expf(s - m_new) : 0.0f;
        ps[lid] = e;
        l = l * corr + block_reduce<64>(red, lid, e, false);
        m = m_new;
        u32 cnt = k_end - c0 < 64u ? k_end - c0 : 64u;
        for (u32 r = 0u; r < 8u; r++) {
            u32 c = lid + r * 64u;
            if (c < dv) {
                float a = acc[r] * corr;
                for (u32 t = 0u; t < cnt; t++) a += ps[t] * ld(V, ((b * lk + c0 + t) * hkv + kh) * dv + c, P[11]);
                acc[r] = a;
            }
        }
        __syncthreads();
    }
    if (splits > 1u) {
        u32 at = (((b * lq + i) * nh + h) * splits + split) * (dv + 2u);
        if (lid == 0u) {
            PART[at] = m;
            PART[at + 1u] = l;
        }
        for (u32 r = 0u; r < 8u; r++) {
            u32 c = lid + r * 64u;
            if (c < dv) PART[at + 2u + c] = acc[r];
        }
        return;
    }
    u32 oo = ((b * lq + i) * nh + h) * dv;
    for (u32 r = 0u; r < 8u; r++) {
        u32 c = lid + r * 64u;
        if (c < dv) st(OUT, oo + c, acc[r] / l, P[12]);
    }
}
