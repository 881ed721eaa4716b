// `conv1d`: `x [N, Cin, L]`, `w [Cout, Cin/groups, K]`, optional bias; one thread per output
// element `(n, co, t)`, a direct sum over `Cin/groups × K` taps.
//
// Params: 0 n outputs, 1 Cin, 2 L, 3 Cout, 4 K, 5 Lout, 6 stride, 7 padding, 8 dilation,
// 9 groups, 10 has bias, 11 dtype X, 12 dtype W, 13 dtype BIAS, 14 dtype OUT.
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (o >= p(0u)) { return; }
    let cin = p(1u);
    let l = p(2u);
    let cout = p(3u);
    let k = p(4u);
    let lout = p(5u);
    let t = o % lout;
    let co = (o / lout) % cout;
    let n = o / (lout * cout);
    let cig = cin / p(9u);
    let g = co / (cout / p(9u));
    var acc = 0.0;
    for (var ci = 0u; ci < cig; ci++) {
        let xrow = (n * cin + g * cig + ci) * l;
        let wrow = (co * cig + ci) * k;
        for (var kk = 0u; kk < k; kk++) {
            let at = i32(t * p(6u) + kk * p(8u)) - i32(p(7u));
            if (at >= 0 && u32(at) < l) {
                acc += ld_x(xrow + u32(at), p(11u)) * ld_w(wrow + kk, p(12u));
            }
        }
    }
    if (p(10u) == 1u) { acc += ld_bias(co, p(13u)); }
    st_out(o, acc, p(14u));
}
