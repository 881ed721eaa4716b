// `softmax` along one dim: one workgroup of 256 threads per (outer, inner) line of `n`
// elements `inner` apart; max, then the sum of exponentials, in shared memory.
//
// Params: 0 lines (outer × inner), 1 n, 2 inner, 3 dtype X, 4 dtype OUT.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;

fn ld_x(i: u32, dt: u32) -> f32 { return decode(X[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

// `reduce` (workgroup of 256) comes from common/reduce256.wgsl.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let line = wg.y * nwg.x + wg.x;
    if (line >= p(0u)) { return; }
    let n = p(1u);
    let inner = p(2u);
    let base = (line / inner) * n * inner + line % inner;
    let dx = p(3u);
    // A finite floor rather than -inf: Metal compiles with fast math, which assumes no infinities.
    var m = -3.0e38;
    for (var k = lid; k < n; k += 256u) { m = max(m, ld_x(base + k * inner, dx)); }
    m = reduce(lid, m, true);
    var s = 0.0;
    for (var k = lid; k < n; k += 256u) { s += exp(ld_x(base + k * inner, dx) - m); }
    let inv = 1.0 / reduce(lid, s, false);
    for (var k = lid; k < n; k += 256u) {
        st_out(base + k * inner, exp(ld_x(base + k * inner, dx) - m) * inv, p(4u));
    }
}
