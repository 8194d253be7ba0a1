//! `cargo run --release -p sessionwatch-kernel --example cross_gateway_bench -- [URL] [SAMPLES]`:
//! prints the cross-gateway notice figures as one JSON object per line.

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(sessionwatch_store::postgres::testing::url);
    let samples = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    match sessionwatch_kernel::bench_pg::cross_gateway_notice_ms(&url, samples).await {
        Ok(figures) => {
            for (name, value, unit) in figures {
                println!("{{\"name\":\"{name}\",\"value\":{value},\"unit\":\"{unit}\"}}");
            }
        }
        Err(e) => {
            eprintln!("cross-gateway bench failed: {e}");
            std::process::exit(1);
        }
    }
}
