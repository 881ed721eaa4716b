// `layer_norm` and `rms_norm` over the last dim: one workgroup of 256 threads per row,
// reductions in shared memory (layer norm: mean, then the centered sum of squares).
//
// Params: 0 rows, 1 D, 2 mode (0 layer norm, 1 affine layer norm, 2 rms norm), 3 dtype X,
// 4 dtype W, 5 dtype BIAS, 6 dtype OUT, 7 eps (f32 bits).
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> BIAS: array<u32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<atomic<u32>>;

fn ld_x(i: u32, dt: u32) -> f32 { return decode(X[word_of(i, dt)], i, dt); }

fn ld_w(i: u32, dt: u32) -> f32 { return decode(W[word_of(i, dt)], i, dt); }

fn ld_bias(i: u32, dt: u32) -> f32 { return decode(BIAS[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

// `reduce` (workgroup of 256) comes from common/reduce256.wgsl.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wg.y * nwg.x + wg.x;
    if (row >= p(0u)) { return; }
    let d = p(1u);
    let mode = p(2u);
    let dx = p(3u);
    let base = row * d;
    if (mode == 2u) {
        var ss = 0.0;
        for (var c = lid; c < d; c += 256u) { let v = ld_x(base + c, dx); ss += v * v; }
        let r = 1.0 / sqrt(reduce(lid, ss, false) / f32(d) + pf(7u));
        for (var c = lid; c < d; c += 256u) {
            st_out(base + c, ld_w(c, p(4u)) * (ld_x(base + c, dx) * r), p(6u));
        }
        return;
    }
    var s = 0.0;
    for (var c = lid; c < d; c += 256u) { s += ld_x(base + c, dx); }
    let mean = reduce(lid, s, false) / f32(d);
    var q = 0.0;
    for (var c = lid; c < d; c += 256u) { let v = ld_x(base + c, dx) - mean; q += v * v; }
    let rstd = 1.0 / sqrt(reduce(lid, q, false) / f32(d) + pf(7u));
    for (var c = lid; c < d; c += 256u) {
        var v = (ld_x(base + c, dx) - mean) * rstd;
        if (mode == 1u) { v = v * ld_w(c, p(4u)) + ld_bias(c, p(5u)); }
        st_out(base + c, v, p(6u));
    }
}
