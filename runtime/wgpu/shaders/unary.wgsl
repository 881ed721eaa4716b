// Elementwise activations: the payload's `unary` ops, `gelu` (erf / tanh) and `silu`.
// One thread per element; compute in f32.
//
// Params (u32 words): 0 n, 1 op (0..=11 unary codes, 100 gelu erf, 101 gelu tanh, 102 silu),
// 2 dtype of X, 3 dtype of OUT. Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves),
// 4 i32 (i32/i64 tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;

fn ld_x(i: u32, dt: u32) -> f32 { return decode(X[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

// erfc with fractional error < 1.2e-7 everywhere (Numerical Recipes' Chebyshev fit `erfcc`).
fn erfc_(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))));
    return select(2.0 - r, r, x >= 0.0);
}

// tanh saturates to ±1 in f32 beyond |x| = 10; clamping avoids inf/inf in some backends' tanh.
fn tanh_(x: f32) -> f32 { return tanh(clamp(x, -10.0, 10.0)); }

fn apply(op: u32, x: f32) -> f32 {
    switch op {
        case 0u: { return -x; }
        case 1u: { return exp(x); }
        case 2u: {
            if (x < 0.0 || x != x) { return nan(); }
            if (x == 0.0) { return bitcast<f32>(0xff800000u); }
            return log(x);
        }
        case 3u: { if (x < 0.0 || x != x) { return nan(); } return sqrt(x); }
        case 4u: { if (x < 0.0 || x != x) { return nan(); } return 1.0 / sqrt(x); }
        case 5u: { return tanh_(x); }
        case 6u: { return 1.0 / (1.0 + exp(-x)); }
        case 7u: { return max(x, 0.0); }
        case 8u: { return abs(x); }
        case 9u: { return 1.0 / x; }
        case 10u: { return sin(x); }
        case 11u: { return cos(x); }
        case 100u: { return 0.5 * x * (2.0 - erfc_(x * 0.70710678118654752)); }
        case 101u: {
            let k = 0.7978845608028654;
            return 0.5 * x * (1.0 + tanh_(k * (x + 0.044715 * x * x * x)));
        }
        case 102u: { return x / (1.0 + exp(-x)); }
        default: { return nan(); }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    st_out(i, apply(p(1u), ld_x(i, p(2u))), p(3u));
}
