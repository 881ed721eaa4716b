// `positions`: out[i] = POS[0] + i (i32 words), the position ids of a call's rows; the
// position is read on the device. A negative position flags the op in STATUS.
//
// Params: 0 n, 1 op index.

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> POS: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<u32>;
@group(0) @binding(3) var<storage, read_write> STATUS: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid;
    if (i >= p(0u)) { return; }
    let start = bitcast<i32>(POS[0]);
    if (start < 0) {
        atomicMax(&STATUS[p(1u)], 1u);
        return;
    }
    OUT[i] = bitcast<u32>(start + i32(i));
}
