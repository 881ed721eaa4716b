//! See `rbuild_runner_support::build`.

fn main() {
    rbuild_runner_support::build::embed_program();
}
