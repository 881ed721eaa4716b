// Generic strided copy with dtype conversion: `permute`, `transpose`, `slice`, `cat` (one
// dispatch per input), `cast`, a copying `reshape`, and `cache_update` (destination offset from a
// position read on the device, so decode steps need no host round trip).
//
// Params: 0 n (elements), 1 rank, 2 dtype SRC, 3 dtype OUT, 4 src base, 5 dst base, 6 position
// mode (1: dst base += POS[0] * pos stride), 7 pos stride, 8..16 dims, 16..24 src strides,
// 24..32 dst strides, 32 largest valid position, 33 op index (for STATUS).
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> SRC: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> POS: array<u32>;
@group(0) @binding(4) var<storage, read_write> STATUS: array<atomic<u32>>;

fn ld_src(i: u32, dt: u32) -> f32 { return decode(SRC[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

fn is_float(dt: u32) -> bool { return dt <= 3u; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    var dst = p(5u);
    if (p(6u) == 1u) {
        let pos = bitcast<i32>(POS[0]);
        if (pos < 0 || u32(pos) > p(32u)) {
            atomicMax(&STATUS[p(33u)], 1u);
            return;
        }
        dst += u32(pos) * p(7u);
    }
    var rem = i;
    var src = p(4u);
    let rank = p(1u);
    for (var k = 0u; k < rank; k++) {
        let d = rank - 1u - k;
        let n = p(8u + d);
        let c = rem % n;
        rem = rem / n;
        src += c * p(16u + d);
        dst += c * p(24u + d);
    }
    let ds = p(2u);
    let dd = p(3u);
    if (is_float(dd) || is_float(ds)) {
        // Float involved: convert through f32 (float -> int truncates toward zero, saturating).
        st_out(dst, ld_src(src, ds), dd);
    } else if (dd == 6u) {
        atomicStore(&OUT[dst], select(0u, 1u, SRC[src] != 0u));
    } else {
        atomicStore(&OUT[dst], SRC[src]);
    }
}
