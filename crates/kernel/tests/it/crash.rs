//! kill -9 mid-write: a child process appends in a loop and reports each acknowledged append; the test
//! SIGKILLs it at a random point, reopens the database and checks that nothing acknowledged was lost.
//!
//! The child is this very test binary, re-executed to run `crash_child_append_loop` with
//! `SW_CRASH_CHILD_DB` set (without it, that test returns at once). This works under `cargo test` and
//! `cargo nextest`, which both run the same libtest harness binary.

use crate::common::all_sequences;
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{NewEvent, Provenance, SystemClock};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_store::{SqliteOptions, SqliteStore};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "SW_CRASH_CHILD_DB";
const CHILD_TEST: &str = "crash::crash_child_append_loop";
const KEYS: [&str; 3] = ["agent:main:subagent:a", "agent:main:subagent:b", "agent:main:telegram:group:c"];
const WATCHER: &str = "agent:main:main";

fn config() -> KernelConfig {
    KernelConfig { store_identity: "crash-store".into(), ..KernelConfig::default() }
}

/// The child's side: append forever, printing `recorded <key> <seq>` after each committed append.
#[test]
fn crash_child_append_loop() {
    let Ok(db) = std::env::var(CHILD_ENV) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let store = SqliteStore::open(&db, SqliteOptions::default()).expect("child: open");
        let k = Kernel::start(store, Arc::new(SystemClock), config()).await;
        // A watcher, so appends also write cursors in the same transaction.
        k.register_watch(WATCHER, KEYS[0], Provenance::Explicit).await;
        let mut out = std::io::stdout().lock();
        for i in 0u64.. {
            let key = KEYS[(i % 5 % 3) as usize];
            let ev = NewEvent::human_message(key, "main", "crash", None);
            match k.record(ev, RecordPolicy::always()).await {
                RecordOutcome::Recorded(e) => {
                    writeln!(out, "recorded {key} {}", e.sequence).unwrap();
                    out.flush().unwrap();
                }
                other => panic!("child: append failed: {other:?}"),
            }
            if i % 50 == 0 {
                k.drain(WATCHER).await;
            }
        }
    });
}

/// Runs the child until it acknowledged `kill_after` appends (plus a random few microseconds), then
/// SIGKILLs it. Answers every acknowledged (key, sequence).
fn run_child_and_kill(db: &Path, kill_after: usize, extra_us: u64) -> Vec<(String, u64)> {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(String, u64)>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("recorded ") {
                let (key, seq) = rest.split_once(' ').expect("recorded <key> <seq>");
                let _ = tx.send((key.to_string(), seq.parse().expect("a sequence")));
            }
        }
    });
    let mut acked = vec![];
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.len() < kill_after {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(a) => acked.push(a),
            Err(_) => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("the child exited early ({status}) after {} appends", acked.len());
                }
                assert!(Instant::now() < deadline, "the child made no progress");
            }
        }
    }
    std::thread::sleep(Duration::from_micros(extra_us));
    child.kill().expect("SIGKILL the child");
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished");
    reader.join().unwrap();
    acked.extend(rx.try_iter());
    acked
}

#[test]
fn sigkill_mid_append_loses_no_acknowledged_append() {
    // Replay a failure with SESSIONWATCH_CRASH_SEED=<the seed it printed>.
    let seed = std::env::var("SESSIONWATCH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
    eprintln!("crash test seed {seed} (replay: SESSIONWATCH_CRASH_SEED={seed})");
    let mut rng =
        TestRng::from_seed(RngAlgorithm::XorShift, &[seed.to_le_bytes(), seed.to_be_bytes()].concat());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut max_acked: BTreeMap<String, u64> = BTreeMap::new();
    for round in 0..5 {
        let kill_after = rng.random_range(1..=400);
        let extra_us = rng.random_range(0..3000);
        let acked = run_child_and_kill(&db, kill_after, extra_us);
        assert!(acked.len() >= kill_after);
        for (key, seq) in &acked {
            let m = max_acked.entry(key.clone()).or_default();
            assert!(
                *seq > *m || round == 0 && *m == 0,
                "sequences grow across rounds: {key} {seq} after {m}"
            );
            *m = (*m).max(*seq);
        }
        rt.block_on(async {
            let store = SqliteStore::open(&db, SqliteOptions::default()).expect("reopen after SIGKILL");
            assert_eq!(store.integrity_check().unwrap(), "ok", "round {round}");
            let k = Kernel::start(store, Arc::new(SystemClock), config()).await;
            for key in KEYS {
                let head = k.head(key, "main").await.expect("head");
                let acked_max = max_acked.get(key).copied().unwrap_or(0);
                assert!(
                    head.head >= acked_max,
                    "round {round}: {key} head {} < acknowledged {acked_max}",
                    head.head
                );
                assert_eq!(head.floor, 0);
                assert_eq!(
                    all_sequences(&k, key).await,
                    (1..=head.head).collect::<Vec<_>>(),
                    "round {round}: {key} is contiguous 1..head"
                );
                // Appending continues at head + 1.
                match k
                    .record(NewEvent::human_message(key, "main", "parent", None), RecordPolicy::always())
                    .await
                {
                    RecordOutcome::Recorded(e) => {
                        assert_eq!(e.sequence, head.head + 1, "round {round}: {key}")
                    }
                    other => panic!("round {round}: append after reopen failed: {other:?}"),
                }
                max_acked.insert(key.to_string(), head.head + 1);
            }
            eprintln!("round {round}: killed after {} acknowledged appends", acked.len());
        });
    }
}
