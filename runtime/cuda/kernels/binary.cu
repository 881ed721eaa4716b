// Elementwise binary ops with NumPy broadcasting up to rank 8; twin of binary.wgsl. Float ops
// in f32, integer ops on i32 words (wrapping).
// Params: 0 n, 1 op (0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow), 2 rank, 3 dtype A,
// 4 dtype B, 5 dtype OUT, 6 integer mode; 8..16 output dims, 16..24 A strides, 24..32 B strides.

__device__ float rb_pow(float x, float y) {
    if (y == 0.0f) return 1.0f;
    if (x != x || y != y) return rb_nan();
    if (x == 0.0f) return y < 0.0f ? rb_inf() : 0.0f;
    if (x < 0.0f) {
        if (floorf(y) != y) return rb_nan();
        float m = powf(-x, y);
        return fabsf(fmodf(y, 2.0f)) == 1.0f ? -m : m;
    }
    return powf(x, y);
}

__device__ float rb_fop(u32 op, float a, float b) {
    switch (op) {
        case 0u: return a + b;
        case 1u: return a - b;
        case 2u: return a * b;
        case 3u: return a / b;
        case 4u: if (a != a || b != b) return rb_nan(); return fmaxf(a, b);
        case 5u: if (a != a || b != b) return rb_nan(); return fminf(a, b);
        default: return rb_pow(a, b);
    }
}

__device__ int rb_iop(u32 op, int a, int b) {
    switch (op) {
        case 0u: return (int)((u32)a + (u32)b);
        case 1u: return (int)((u32)a - (u32)b);
        case 2u: return (int)((u32)a * (u32)b);
        case 4u: return a > b ? a : b;
        default: return a < b ? a : b;
    }
}

RB_KERNEL rb_binary(const u32* P, const u32* GATE, const u32* A, const u32* B, u32* OUT) {
    RB_GATED
    u32 i = flat_256();
    if (i >= P[0]) return;
    u32 rem = i, ia = 0u, ib = 0u, rank = P[2];
    for (u32 k = 0u; k < rank; k++) {
        u32 d = rank - 1u - k;
        u32 n = P[8u + d];
        u32 c = rem % n;
        rem /= n;
        ia += c * P[16u + d];
        ib += c * P[24u + d];
    }
    if (P[6] == 1u) {
        OUT[i] = (u32)rb_iop(P[1], (int)A[ia], (int)B[ib]);
    } else {
        st(OUT, i, rb_fop(P[1], ld(A, ia, P[3]), ld(B, ib, P[4])), P[5]);
    }
}
