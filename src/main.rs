//! `sessionwatch`: the gateway (`serve`), a client for every tool and host call, direct access to a
//! signal-log database (`db …`), the `demo` story and the benchmarks.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
