//! Graph mutations for the XNNPACK robustness tests (`xnnpack_ops`, `xnnpack_payloads`): one
//! field of a decoded payload changed, deterministically from a caller's random numbers.

/// A value to put in a mutated field: near the original, a boundary, or anything.
fn odd_u32(r: &mut impl FnMut() -> usize, v: u32) -> u32 {
    match r() % 8 {
        0 => 0,
        1 => 1,
        2 => v.wrapping_add(1),
        3 => v.wrapping_sub(1),
        4 => u32::MAX,
        5 => 1 << (r() % 31),
        6 => v.wrapping_mul(2),
        _ => r() as u32,
    }
}

/// One field of the graph changed: a value's dims, datatype, quantization or flags, or one of a
/// node's ids or parameters.
pub fn mutate_graph(g: &mut rbuild_runtime::backends::xnnpack::XnnGraph, r: &mut impl FnMut() -> usize) {
    use rbuild_runtime::backends::xnnpack::{NodeParams as P, Quant, XnnDatatype as D};
    if r() % 2 == 0 && !g.values.is_empty() {
        let n = g.values.len();
        let v = &mut g.values[r() % n];
        match r() % 5 {
            0 if !v.dims.is_empty() => {
                let i = r() % v.dims.len();
                v.dims[i] = odd_u32(r, v.dims[i] as u32) as usize % (1 << 20);
            }
            1 => {
                let k = r() % (v.dims.len() + 1);
                if r() % 2 == 0 { v.dims.truncate(k) } else { v.dims.insert(k, 1 + r() % 4) }
            }
            2 => v.datatype = [D::Fp32, D::Fp16, D::Bf16, D::QInt8, D::QUInt8, D::QcInt8, D::QInt32, D::QcInt32, D::QcInt4, D::QdInt8, D::QbInt4, D::Int32][r() % 12],
            3 => {
                v.quant = match r() % 5 {
                    0 => Quant::None,
                    1 => Quant::PerTensor { scale: [0.0, -1.0, f32::NAN, 1e-30, 0.05, 1e30][r() % 6], zero_point: r() as i32 % 400 - 100 },
                    2 => Quant::PerTokenDynamic { num_nonbatch_dims: r() as i32 % 5 - 1 },
                    _ => v.quant.clone(),
                }
            }
            _ => v.flags = (r() % 4) as u32,
        }
        return;
    }
    if g.nodes.is_empty() {
        return;
    }
    let n = g.nodes.len();
    let node = &mut g.nodes[r() % n];
    if r() % 6 == 0 {
        node.output_min_max = [None, Some((0.0, 6.0)), Some((1.0, -1.0)), Some((f32::NAN, 1.0))][r() % 4];
        return;
    }
    let nv = g.values.len() as u32;
    let id = |v: &mut u32, r: &mut dyn FnMut() -> usize| *v = if r() % 4 == 0 { odd_u32(&mut || r(), *v) } else { r() as u32 % nv.max(1) };
    match &mut node.params {
        P::Unary { input, output, flags } => match r() % 3 {
            0 => id(input, r),
            1 => id(output, r),
            _ => *flags = odd_u32(r, *flags),
        },
        P::Binary { input1, input2, output, flags } => match r() % 4 {
            0 => id(input1, r),
            1 => id(input2, r),
            2 => id(output, r),
            _ => *flags = odd_u32(r, *flags),
        },
        P::FullyConnected { input, filter, output, flags, .. } => match r() % 4 {
            0 => id(input, r),
            1 => id(filter, r),
            2 => id(output, r),
            _ => *flags = odd_u32(r, *flags),
        },
        P::Conv(c) => {
            let fields: [&mut u32; 16] = [
                &mut c.padding_top, &mut c.padding_right, &mut c.padding_bottom, &mut c.padding_left, &mut c.kernel_height, &mut c.kernel_width,
                &mut c.subsampling_height, &mut c.subsampling_width, &mut c.dilation_height, &mut c.dilation_width, &mut c.group_input_channels,
                &mut c.group_output_channels, &mut c.groups, &mut c.adjustment_height, &mut c.adjustment_width, &mut c.flags,
            ];
            let k = r() % 16;
            let v = *fields[k];
            *fields[k] = odd_u32(r, v);
        }
        P::Pool(p) => {
            let fields: [&mut u32; 11] = [
                &mut p.padding_top, &mut p.padding_right, &mut p.padding_bottom, &mut p.padding_left, &mut p.pooling_height, &mut p.pooling_width,
                &mut p.stride_height, &mut p.stride_width, &mut p.dilation_height, &mut p.dilation_width, &mut p.flags,
            ];
            let k = r() % 11;
            let v = *fields[k];
            *fields[k] = odd_u32(r, v);
        }
        P::Transpose { perm, .. } if !perm.is_empty() => {
            let i = r() % perm.len();
            perm[i] = r() % 6;
        }
        P::Reshape { new_shape, .. } if !new_shape.is_empty() => {
            let i = r() % new_shape.len();
            new_shape[i] = r() % 9;
        }
        P::Slice { offsets, sizes, .. } if !offsets.is_empty() && !sizes.is_empty() => {
            let (i, j) = (r() % offsets.len(), r() % sizes.len());
            if r() % 2 == 0 { offsets[i] = r() % 9 } else { sizes[j] = r() % 9 }
        }
        P::ConstantPad { pre, post, value, .. } if !pre.is_empty() && !post.is_empty() => match r() % 3 {
            0 => pre[0] = r() % 5,
            1 => post.truncate(post.len() - 1),
            _ => *value = f32::NAN,
        },
        P::ResizeBilinear { new_height, new_width, flags, .. } => match r() % 3 {
            0 => *new_height = odd_u32(r, *new_height) % 4096,
            1 => *new_width = odd_u32(r, *new_width),
            _ => *flags = odd_u32(r, *flags),
        },
        P::Concat { axis, inputs, .. } => {
            if r() % 2 == 0 { *axis = odd_u32(r, *axis) } else if !inputs.is_empty() {
                let i = r() % inputs.len();
                id(&mut inputs[i], r);
            }
        }
        P::UnaryParam { param, .. } => *param = [f32::NAN, f32::INFINITY, -1.0, 0.0][r() % 4],
        _ => {}
    }
}

