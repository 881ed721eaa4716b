// `embedding`: gathers rows of a float table `[V, D]` by i32 indices; one thread per output
// element. An index outside `0..V` writes 0 and flags the op in STATUS (reported by the host).
//
// Params: 0 n (indices × D), 1 D, 2 V, 3 dtype TABLE, 4 dtype OUT, 5 op index; a quantized
// table (dtype 16 int8 / 17 int4, grouped scales in SCALES): 6 D, 7 group size, 8 dtype SCALES.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> TABLE: array<u32>;
@group(0) @binding(2) var<storage, read> IDX: array<u32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> STATUS: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> SCALES: array<u32>;

// Quantized dtypes through common/quant.wgsl: columns p(6), group size p(7), scales dtype p(8).
fn ld_table(i: u32, dt: u32) -> f32 {
    if (is_quant(dt)) {
        let c = p(6u);
        return q_value(TABLE[q_word(i, c, dt)], i, c, dt) * ld_scales(q_scale_at(i, c, p(7u)), p(8u));
    }
    return decode(TABLE[word_of(i, dt)], i, dt);
}

fn ld_scales(i: u32, dt: u32) -> f32 { return decode(SCALES[word_of(i, dt)], i, dt); }

// Output element i (dtype dt) := v; see `put_of` in common/prelude.wgsl.
fn st_out(i: u32, v: f32, dt: u32) {
    let s = put_of(i, v, dt);
    if (s.keep == 0u) { atomicStore(&OUT[s.at], s.bits); } else { atomicAnd(&OUT[s.at], s.keep); atomicOr(&OUT[s.at], s.bits); }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    let d = p(1u);
    let row = bitcast<i32>(IDX[i / d]);
    if (row < 0 || u32(row) >= p(2u)) {
        atomicMax(&STATUS[p(5u)], 2u);
        st_out(i, 0.0, p(4u));
        return;
    }
    st_out(i, ld_table(u32(row) * d + i % d, p(3u)), p(4u));
}
