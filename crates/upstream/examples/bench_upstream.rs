//! `cargo run --release -p sessionwatch-upstream --example bench_upstream -- [MiB] [opencode messages]`
fn main() {
    let mut args = std::env::args().skip(1);
    let mib = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let msgs = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    match sessionwatch_upstream::bench::run(mib, msgs) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("bench failed: {e}");
            std::process::exit(1);
        }
    }
}
