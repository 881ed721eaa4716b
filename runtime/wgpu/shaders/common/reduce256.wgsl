// Shared by kernels with a 256-thread workgroup that reduce across it (norm, softmax);
// shaders.rs puts it after common/prelude.wgsl and before the kernel.

var<workgroup> red: array<f32, 256>;

// Workgroup-wide sum (max when `is_max`) of each thread's `v`; every thread gets the result.
fn reduce(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let o = red[lid + s];
            red[lid] = select(red[lid] + o, max(red[lid], o), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
