// `if_zero` on the device; twin of gate.wgsl: when FLAG[0] is not 0, zeroes the grid words of
// the guarded launches in ARGS, whose kernels then return at once (RB_GATED).
// Params: 0 first word of the guarded grids in ARGS, 1 word count (3 per launch).

RB_KERNEL rb_gate(const u32* P, const u32* GATE, const u32* FLAG, u32* ARGS) {
    if (FLAG[0] == 0u) return;
    for (u32 i = threadIdx.x; i < P[1]; i += 64u) ARGS[P[0] + i] = 0u;
}
