// Shared helpers of every CUDA kernel: the CUDA C twin of runtime/wgpu/shaders/common/*.wgsl.
// NVRTC compiles each kernel as this file + the kernel file (kernels.rs joins them), without any
// CUDA header, so the runtime needs only the driver and NVRTC.
//
// Every kernel takes (P, GATE, buffers...): P points at the launch's 64 parameter words (the
// layout the schedule writes, documented per kernel and identical to the WGSL kernel's), GATE
// at the launch's grid triple when an `if_zero` computed on the device guards it (zeroed by
// `rb_gate` when the flag is not 0) or is null. Buffers are arrays of 32-bit words.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32); quantized weights 16 int8, 17 int4.

typedef unsigned int u32;

#define RB_KERNEL extern "C" __global__ void
// A guarded launch whose guard is off runs no blocks' work.
#define RB_GATED if (GATE != 0 && GATE[0] == 0u) return;

__device__ __forceinline__ float pf(const u32* P, u32 i) { return __uint_as_float(P[i]); }
__device__ __forceinline__ float rb_nan() { return __uint_as_float(0x7fc00000u); }
__device__ __forceinline__ float rb_inf() { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ float rb_fract(float x) { return x - floorf(x); }

// The word holding element i of a dtype-dt buffer (f16/bf16: two halves per word).
__device__ __forceinline__ u32 word_of(u32 i, u32 dt) { return (dt == 2u || dt == 3u) ? (i >> 1) : i; }

__device__ __forceinline__ float f16_to_f32(u32 h) {
    unsigned short b = (unsigned short)h;
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
    return f;
}

// f32 -> f16 bits, round to nearest even; overflow gives inf, NaN gives 0x7e00 (as the WGSL twin).
__device__ __forceinline__ u32 f16_bits(float v) {
    if (v != v) return 0x7e00u;
    unsigned short b;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(v));
    return (u32)b;
}

__device__ __forceinline__ u32 bf16_bits(float v) {
    u32 b = __float_as_uint(v);
    if (v != v) return (b >> 16) | 0x40u;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// Element i of a dtype-dt buffer as f32, from its word w (the buffer at word_of(i, dt)).
__device__ __forceinline__ float decode(u32 w, u32 i, u32 dt) {
    switch (dt) {
        case 2u: return f16_to_f32((w >> ((i & 1u) * 16u)) & 0xffffu);
        case 3u: return __uint_as_float(((w >> ((i & 1u) * 16u)) & 0xffffu) << 16);
        case 4u: return (float)(int)w;
        case 6u: return (float)w;
        default: return __uint_as_float(w);
    }
}

__device__ __forceinline__ float ld(const u32* B, u32 i, u32 dt) { return decode(B[word_of(i, dt)], i, dt); }

// Element i of a dtype-dt output := v. Halves (f16/bf16) share a word with a neighbour written
// by another thread, so they are cleared and set atomically.
__device__ __forceinline__ void st(u32* OUT, u32 i, float v, u32 dt) {
    u32 sh = (i & 1u) * 16u;
    switch (dt) {
        case 2u: atomicAnd(&OUT[i >> 1], ~(0xffffu << sh)); atomicOr(&OUT[i >> 1], f16_bits(v) << sh); return;
        case 3u: atomicAnd(&OUT[i >> 1], ~(0xffffu << sh)); atomicOr(&OUT[i >> 1], bf16_bits(v) << sh); return;
        case 4u: OUT[i] = (u32)(int)v; return;
        case 6u: OUT[i] = (v != 0.0f) ? 1u : 0u; return;
        default: OUT[i] = __float_as_uint(v); return;
    }
}

// Quantized weights of a [rows, c] matrix (dtype 16 int8: 4 bytes per word; 17 int4: each row
// packed separately, ceil(c/2) bytes, low nibble first); scales [rows, ceil(c / g)].
__device__ __forceinline__ bool is_quant(u32 dt) { return dt == 16u || dt == 17u; }
__device__ __forceinline__ u32 q4_byte(u32 i, u32 c) { return (i / c) * ((c + 1u) / 2u) + (i % c) / 2u; }
__device__ __forceinline__ u32 q_word(u32 i, u32 c, u32 dt) { return (dt == 16u ? i : q4_byte(i, c)) >> 2; }
__device__ __forceinline__ float q_value(u32 w, u32 i, u32 c, u32 dt) {
    if (dt == 16u) return (float)(((int)(w << (24u - (i & 3u) * 8u))) >> 24);
    return (float)(((int)(w << (28u - (q4_byte(i, c) & 3u) * 8u - ((i % c) & 1u) * 4u))) >> 28);
}
__device__ __forceinline__ u32 q_scale_at(u32 i, u32 c, u32 g) { return (i / c) * ((c + g - 1u) / g) + (i % c) / g; }

// Element i of a weight that may be quantized: columns P[cw], group size P[cw+1], scales dtype
// P[cw+2] (the layout of gemm/gemv/embedding's params).
__device__ __forceinline__ float ld_weight(const u32* W, const u32* S, const u32* P, u32 cw, u32 i, u32 dt) {
    if (is_quant(dt)) {
        u32 c = P[cw];
        return q_value(W[q_word(i, c, dt)], i, c, dt) * ld(S, q_scale_at(i, c, P[cw + 1u]), P[cw + 2u]);
    }
    return ld(W, i, dt);
}

// Linear index of a thread over a 1-D launch laid out as a 2-D grid of 256-thread blocks.
__device__ __forceinline__ u32 flat_256() { return (blockIdx.y * gridDim.x + blockIdx.x) * 256u + threadIdx.x; }

// Block-wide sum (max when is_max) of each thread's v over N threads; every thread gets it.
template <int N>
__device__ __forceinline__ float block_reduce(float* red, u32 lid, float v, bool is_max) {
    red[lid] = v;
    __syncthreads();
    for (u32 s = N / 2; s > 0u; s >>= 1) {
        if (lid < s) {
            float o = red[lid + s];
            red[lid] = is_max ? fmaxf(red[lid], o) : red[lid] + o;
        }
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}
