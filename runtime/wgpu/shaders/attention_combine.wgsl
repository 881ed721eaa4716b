// Second pass of split-key attention (see attention.wgsl): merges the S partial records
// [max, sum, unnormalized output] of each (batch, query row, head) into the output, one thread
// per output element: out = Σ acc_s·e^(m_s − M) / Σ l_s·e^(m_s − M), M = max m_s.
//
// Params: 0 n outputs (B·Lq·H·Dv), 1 Dv, 2 splits S, 3 dtype OUT.
// Device dtype codes: 1 f32, 2 f16, 3 bf16 (packed halves in u32 words), 4 i32 (i32/i64
// tensors), 6 bool (u32).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> PART: array<f32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<atomic<u32>>;

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
    let dv = p(1u);
    let splits = p(2u);
    let row = o / dv;
    let c = o % dv;
    let base = row * splits * (dv + 2u);
    var mx = -3.0e38;
    for (var s = 0u; s < splits; s++) { mx = max(mx, PART[base + s * (dv + 2u)]); }
    var num = 0.0;
    var den = 0.0;
    for (var s = 0u; s < splits; s++) {
        let at = base + s * (dv + 2u);
        let w = exp(PART[at] - mx);
        den += PART[at + 1u] * w;
        num += PART[at + 2u + c] * w;
    }
    st_out(o, num / den, p(3u));
}
