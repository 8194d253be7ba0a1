//! `sessionwatch`: the gateway (`serve`), a client for every tool and host call, direct access to a
//! signal-log database (`db …`), the `demo` story and the benchmarks.

mod cli;

// The gateway allocates many small, short-lived values per request (JSON, rows, keys).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
