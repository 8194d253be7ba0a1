//! `sessionwatch`: the gateway (`serve`), a client for every tool and host call, direct access to a
//! signal-log database (`db …`), the `demo` story and the benchmarks.

mod cli;

// The gateway allocates many small, short-lived values per request (JSON, rows, keys).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    cli::main()
}

/// With transparent huge pages, the first touch of each 2 MiB region zeroes all of it in one page fault,
/// on whichever thread touched it: the writer in the middle of a batch, a worker in the middle of a
/// request. Without them `bench gateway` zeroes pages in under 0.1 % of its CPU samples instead of
/// 0.8–2 %, and its peak RSS is 37 MB instead of 61 (docs/performance.md). mimalloc is built without
/// its `madvise(MADV_HUGEPAGE)` (the `no_thp` feature: that covers its arenas from the process's start,
/// before `main`); this turns them off for the rest, on a kernel that gives them unasked (THP
/// `always`). Best effort: a kernel without the call keeps them.
#[cfg(target_os = "linux")]
fn no_transparent_huge_pages() {
    let _ = nix::sys::prctl::set_thp_disable(true);
}

#[cfg(not(target_os = "linux"))]
fn no_transparent_huge_pages() {}
