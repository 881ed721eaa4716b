//! A small graph goes through planning and emission and runs in rbuild's runtime with the
//! same numbers as eager evaluation of the graph.

use rbuild_export::graph::TensorMeta;
use rbuild_export::{eval, emit, passes, plan, ConstData, GraphBuilder};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Program, ScalarType};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn conv_relu_mean_runs_like_eager_evaluation() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[1, 2, 5, 5]));
    let w: Vec<f32> = (0..3 * 2 * 3 * 3).map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0).collect();
    let w = b.constant("w", ScalarType::Float, &[3, 2, 3, 3], ConstData::owned(f32_bytes(&w))).unwrap();
    let bias = b.constant("b", ScalarType::Float, &[3], ConstData::owned(f32_bytes(&[0.1, -0.2, 0.3]))).unwrap();
    let y = b.conv2d(x, w, Some(bias), 1, 1, 1, 1).unwrap();
    let y = b.relu(y).unwrap();
    let z = b.mean(y, &[-1, -2], true).unwrap();
    b.output(z);
    b.output(y);
    let mut g = b.finish();
    let input: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let expected = eval::evaluate(&g, &[f32_bytes(&input)]).unwrap();

    passes::optimize(&mut g).unwrap();
    let p = plan::plan_memory(&g);
    assert!(p.arena_bytes <= p.naive_bytes);
    let bytes = emit::emit(&g, &p, "forward").unwrap();
    assert_eq!(bytes, emit::emit(&g, &p, "forward").unwrap(), "emission is deterministic");

    let buf = AlignedBuf::from_bytes(&bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[1, 2, 5, 5], &f32_bytes(&input)).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    for (i, want) in expected.iter().enumerate() {
        let got = floats(m.output_bytes(i).unwrap());
        let want = floats(want);
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5, "output {i}: {a} vs {b}");
        }
    }
}

#[test]
fn shape_errors_name_the_op_and_shapes() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[1, 3, 8, 8]));
    let w = b.constant("w", ScalarType::Float, &[4, 2, 3, 3], ConstData::owned(vec![0; 4 * 2 * 9 * 4])).unwrap();
    let e = b.conv2d(x, w, None, 1, 0, 1, 1).unwrap_err().to_string();
    assert!(e.contains("aten::convolution") && e.contains("[1, 3, 8, 8]") && e.contains("[4, 2, 3, 3]"), "{e}");
    let y = b.input("y", TensorMeta::fixed(ScalarType::Float, &[2, 5]));
    let e = b.add(x, y).unwrap_err().to_string();
    assert!(e.contains("aten::add.Tensor") && e.contains("broadcast"), "{e}");
}

/// Transposed convolution shapes follow PyTorch's ConvTranspose2d: (in − 1)·stride − 2·padding
/// + dilation·(k − 1) + output_padding + 1, with weights [in, out/groups, kh, kw].
#[test]
fn transposed_convolution_shapes() {
    use rbuild_export::graph::Arg;
    let conv_t = |x_sizes: &[usize], w_sizes: &[usize], stride: i64, padding: i64, output_padding: i64, groups: i64| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", TensorMeta::fixed(ScalarType::Float, x_sizes));
        let n: usize = w_sizes.iter().product();
        let w = b.constant("w", ScalarType::Float, w_sizes, ConstData::owned(vec![0; n * 4])).unwrap();
        let pair = |v: i64| Arg::Ints(vec![v, v]);
        let args = vec![Arg::Tensor(x), Arg::Tensor(w), Arg::None, pair(stride), pair(padding), pair(1), Arg::Bool(true), pair(output_padding), Arg::Int(groups)];
        b.call1("aten::convolution", args).map(|y| b.meta(y).sizes().unwrap())
    };
    assert_eq!(conv_t(&[1, 6, 7, 9], &[6, 2, 3, 3], 2, 1, 1, 2).unwrap(), [1, 4, 14, 18]);
    assert_eq!(conv_t(&[2, 4, 5, 5], &[4, 3, 2, 2], 1, 0, 0, 1).unwrap(), [2, 3, 6, 6]);
    let e = conv_t(&[1, 5, 7, 7], &[6, 2, 3, 3], 2, 1, 0, 2).unwrap_err().to_string();
    assert!(e.contains("in_channels = weight[0]"), "{e}");
    let e = conv_t(&[1, 6, 7, 7], &[6, 2, 3, 3], 2, 1, 2, 2).unwrap_err().to_string();
    assert!(e.contains("output padding 2"), "{e}");
}
