// `if_zero` on the device: the guarded ops' dispatches are indirect, their grids written by the
// host into ARGS before the submission; when FLAG[0] (an i32 word computed on the device) is not
// 0 this kernel zeroes those grids, so the guarded dispatches run no workgroups. No host round
// trip.
//
// Params: 0 first word of the guarded grids in ARGS, 1 word count (3 per dispatch).

struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> FLAG: array<u32>;
@group(0) @binding(2) var<storage, read_write> ARGS: array<u32>;

fn p(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (FLAG[0] == 0u) { return; }
    for (var i = lid; i < p(1u); i += 64u) {
        ARGS[p(0u) + i] = 0u;
    }
}
