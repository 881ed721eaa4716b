// Elementwise activations (the payload's `unary` ops, `gelu` erf / tanh, `silu`); twin of
// unary.wgsl. One thread per element, f32 math.
// Params: 0 n, 1 op (0..=11 unary codes, 100 gelu erf, 101 gelu tanh, 102 silu), 2 dtype X,
// 3 dtype OUT.

__device__ float rb_tanh(float x) { return tanhf(fminf(fmaxf(x, -10.0f), 10.0f)); }

__device__ float rb_apply(u32 op, float x) {
    switch (op) {
        case 0u: return -x;
        case 1u: return expf(x);
        case 2u:
            if (x < 0.0f || x != x) return rb_nan();
            if (x == 0.0f) return -rb_inf();
            return logf(x);
        case 3u: if (x < 0.0f || x != x) return rb_nan(); return sqrtf(x);
        case 4u: if (x < 0.0f || x != x) return rb_nan(); return 1.0f / sqrtf(x);
        case 5u: return rb_tanh(x);
        case 6u: return 1.0f / (1.0f + expf(-x));
        case 7u: return fmaxf(x, 0.0f);
        case 8u: return fabsf(x);
        case 9u: return 1.0f / x;
        case 10u: return sinf(x);
        case 11u: return cosf(x);
        case 100u: return 0.5f * x * erfcf(-x * 0.70710678118654752f);
        case 101u: return 0.5f * x * (1.0f + rb_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
        case 102u: return x / (1.0f + expf(-x));
        default: return rb_nan();
    }
}

RB_KERNEL rb_unary(const u32* P, const u32* GATE, const u32* X, u32* OUT) {
    RB_GATED
    u32 i = flat_256();
    if (i >= P[0]) return;
    st(OUT, i, rb_apply(P[1], ld(X, i, P[2])), P[3]);
}
