// Quantized weights (device dtype 16 int8, 17 int4) of a [rows, c] matrix, shared by the kernels
// that read them (gemm, gemv, embedding); shaders.rs puts it after common/prelude.wgsl. Pure
// functions: the kernel reads the word and the scale from its own bindings.
// int8: four bytes per u32 word. int4: each row packed separately, ceil(c/2) bytes, low nibble
// first. Scales: [rows, ceil(c / g)] for groups of g columns.

fn is_quant(dt: u32) -> bool { return dt == 16u || dt == 17u; }

// Byte of int4 element i (row i / c, column i % c).
fn q4_byte(i: u32, c: u32) -> u32 { return (i / c) * ((c + 1u) / 2u) + (i % c) / 2u; }

// The u32 word holding quantized element i.
fn q_word(i: u32, c: u32, dt: u32) -> u32 { return select(q4_byte(i, c), i, dt == 16u) >> 2u; }

// Quantized element i (before scaling) from its word `w` (the buffer at `q_word(i, c, dt)`),
// sign-extended with shifts (extractBits needs MSL 1.2).
fn q_value(w: u32, i: u32, c: u32, dt: u32) -> f32 {
    if (dt == 16u) { return f32(bitcast<i32>(w << (24u - (i & 3u) * 8u)) >> 24u); }
    return f32(bitcast<i32>(w << (28u - (q4_byte(i, c) & 3u) * 8u - ((i % c) & 1u) * 4u)) >> 28u);
}

// Index in the scales of element i, for groups of g columns.
fn q_scale_at(i: u32, c: u32, g: u32) -> u32 { return (i / c) * ((c + g - 1u) / g) + (i % c) / g; }
