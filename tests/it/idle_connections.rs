//! Issue 33 item 8: under `RLIMIT_NOFILE` 1024 (a common service default), 1,100 loopback connections
//! that never finish their headers used to take every connection slot, and a legitimate `GET /healthz`
//! waited in the listen backlog until their header timeout.

use crate::support::Server;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

const IDLE_CONNECTIONS: usize = 1_100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_under_a_1024_fd_limit_do_not_starve_healthz() {
    // This test itself holds the 1,100 connections: give it its whole hard limit.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    assert!(hard >= 2 * IDLE_CONNECTIONS as u64, "the hard fd limit ({hard}) is too low for this test");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_adjusted(dir.path(), &[], |command| {
        // SAFETY: only an async-signal-safe system call between fork and exec.
        unsafe {
            command.pre_exec(move || {
                setrlimit(Resource::RLIMIT_NOFILE, 1024, hard).map_err(std::io::Error::from)
            });
        }
    });
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
    for i in 0..IDLE_CONNECTIONS {
        let mut tcp = TcpStream::connect(&addr).unwrap();
        if i % 2 == 0 {
            tcp.write_all(b"POST /tools/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").unwrap();
        } // the others send nothing at all
        idle.push(tcp);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client = reqwest::Client::new();
    for attempt in 0..3 {
        let probe = client.get(format!("{}/healthz", server.base)).send();
        let answer = tokio::time::timeout(Duration::from_secs(2), probe).await;
        assert!(
            matches!(&answer, Ok(Ok(r)) if r.status() == 200),
            "healthz probe {attempt} while {IDLE_CONNECTIONS} connections idle: {answer:?}"
        );
    }
    drop(idle);
}
