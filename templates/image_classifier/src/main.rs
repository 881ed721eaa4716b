//! `image_classifier --model model.pte --image photo.png [--top 5] [--labels labels.txt]`:
//! classify one image with an ExecuTorch-compatible program and print the top-k classes.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rbuild_image_classifier::program::{image_input_size, logits};
use rbuild_image_classifier::{classify, decode, kernels, preprocess};
use rbuild_runner_support::{cli, in_file, program, protocol, Failure, Outcome};
use rbuild_runtime::{KernelContext, ScalarType};

#[derive(Parser)]
#[command(name = "image_classifier", about = "Classify an image with an ExecuTorch-compatible program")]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// PNG or JPEG image.
    #[arg(long, required_unless_present_any = ["list_kernels", "verify_input"])]
    image: Option<PathBuf>,
    /// How many classes to print.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Class names, one per line (line N names class N); default: the class index.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Threads kernels may use.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Executions to time; the median latency is reported.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Print the registered kernels' op names, one per line, and exit.
    #[arg(long)]
    list_kernels: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Run on the tensors `input.0`, … of this safetensors file instead of an image and print
    /// the outputs as `RBUILD_OUTPUT` lines and an `RBUILD_STATS` line (`rbuild verify`).
    #[arg(long, conflicts_with_all = ["image", "json"])]
    verify_input: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    cli::main(std::env::args_os(), run)
}

fn run(a: Args) -> Outcome {
    if a.list_kernels {
        return cli::print_kernel_ops(&kernels::registry());
    }
    let file = program::open(a.model.as_deref(), false, rbuild_runner_support::embedded_program!())?;
    let program = file.load()?;
    let model_name = file.name();
    let registry = kernels::registry();
    let mut method = in_file(program.load_method("forward", &registry, &kernels::backends()), model_name)?;
    if let Some(path) = &a.verify_input {
        return protocol::verify_run(&mut method, path, model_name, a.threads);
    }
    let image_path = a.image.clone().ok_or_else(|| Failure("--image is required".into()))?;
    let image_bytes = in_file(std::fs::read(&image_path), &image_path)?;
    let image = in_file(decode::decode_image(&image_bytes), &image_path)?;
    let (crop_h, crop_w) = in_file(image_input_size(&method), model_name)?;

    let input = preprocess::imagenet_eval(&image, crop_h, crop_w);
    let input_bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut ctx = KernelContext { threads: a.threads.max(1) };
    let mut times = Vec::with_capacity(a.repeat.max(1));
    for _ in 0..a.repeat.max(1) {
        let t = Instant::now();
        // Re-bound every run: planned memory may reuse the input's bytes once it is dead.
        in_file(method.set_input_tensor(0, ScalarType::Float, &[1, 3, crop_h, crop_w], &input_bytes), model_name)?;
        in_file(method.execute(&mut ctx), model_name)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];

    let logits = in_file(logits(&method), model_name)?;
    let labels = match &a.labels {
        Some(p) => {
            let labels = classify::parse_labels(&in_file(std::fs::read_to_string(p), p)?);
            if labels.len() != logits.len() {
                return Err(Failure(format!(
                    "{}: {} labels, but the model has {} classes",
                    p.display(),
                    labels.len(),
                    logits.len()
                )));
            }
            Some(labels)
        }
        None => None,
    };
    let top = classify::top_k(&classify::softmax(&logits), a.top);
    let label = |i: usize| labels.as_ref().map_or_else(|| i.to_string(), |l| l[i].clone());

    if a.json {
        let rows: Vec<_> = top
            .iter()
            .enumerate()
            .map(|(r, &(i, p))| serde_json::json!({"rank": r + 1, "index": i, "label": label(i), "probability": p}))
            .collect();
        let out = serde_json::json!({
            "model": model_name.display().to_string(),
            "image": image_path.display().to_string(),
            "input_shape": [1, 3, crop_h, crop_w],
            "top": rows,
            "latency_ms": {"median": median, "min": times[0], "runs": times.len()},
            "threads": ctx.threads,
        });
        println!("{out}");
    } else {
        for (r, &(i, p)) in top.iter().enumerate() {
            println!("{} {i} {} {p:.6}", r + 1, label(i));
        }
        println!(
            "latency: median {median:.3} ms, min {:.3} ms over {} run(s), {} thread(s)",
            times[0],
            times.len(),
            ctx.threads
        );
    }
    Ok(())
}
