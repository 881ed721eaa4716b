//! The program side of classification: the image input's size and the class logits, read from
//! a loaded `forward` method (shared by the runner and `rbuild eval`).

use rbuild_runtime::{Method, ScalarType, Value};

/// The (H, W) of the method's image input, which must be a float32 [1, 3, H, W] tensor in
/// contiguous (NCHW) order.
pub fn image_input_size(method: &Method<'_>) -> Result<(usize, usize), String> {
    if method.inputs().len() != 1 {
        return Err(format!("method 'forward' takes {} inputs; an image classifier takes one", method.inputs().len()));
    }
    let Some(Value::Tensor(t)) = method.input_value(0) else {
        return Err("the method's input is not a tensor".into());
    };
    let shape = t.shape.as_slice();
    match shape {
        [1, 3, h, w] if t.dtype == ScalarType::Float && t.dim_order.is_contiguous() && *h > 0 && *w > 0 => Ok((*h, *w)),
        _ => Err(format!(
            "the method's input is {} {shape:?} (dim order {:?}); an image classifier needs float32 [1, 3, H, W] (NCHW)",
            t.dtype,
            t.dim_order.as_slice()
        )),
    }
}

/// Output 0 as class logits: float32 [1, C] or [C].
pub fn logits(method: &Method<'_>) -> Result<Vec<f32>, String> {
    let Some(Value::Tensor(t)) = method.output_value(0) else {
        return Err("the method's first output is not a tensor".into());
    };
    let shape = t.shape.as_slice().to_vec();
    if t.dtype != ScalarType::Float || !matches!(shape.as_slice(), [1, _] | [_]) {
        return Err(format!("the method's output is {} {shape:?}; expected float32 logits [1, C]", t.dtype));
    }
    let bytes = method.output_bytes(0).ok_or("the method's output has no data")?;
    Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}
