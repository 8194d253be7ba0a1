//! Runs the kernel benchmark and prints its figures:
//! `cargo run --release -p sessionwatch-kernel --example kernel_bench [-- --quick] [-- --dir DIR]`.

use sessionwatch_kernel::bench::run_kernel_bench;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    for f in run_kernel_bench(&dir, quick).await {
        println!("{:<30} {:>14.2} {}", f.name, f.value, f.unit);
    }
}
