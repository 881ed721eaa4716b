// `if_zero` on the device: the guarded ops' dispatches are indirect, their grids written by the
// host into ARGS before the submission; when FLAG[0] (an i32 word computed on the device) is not
// 0 this kernel zeroes those grids, so the guarded dispatches run no workgroups. No host round
// trip.
//
// Params: 0 first word of the guarded grids in ARGS, 1 word count (3 per dispatch).

// Binding 0 is P, the parameter words (read with p/pf), declared in common/prelude.wgsl.
@group(0) @binding(1) var<storage, read> FLAG: array<u32>;
@group(0) @binding(2) var<storage, read_write> ARGS: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (FLAG[0] == 0u) { return; }
    for (var i = lid; i < p(1u); i += 64u) {
        ARGS[p(0u) + i] = 0u;
    }
}
