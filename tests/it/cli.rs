//! The CLI as a user runs it: `demo`, `db …`, and client commands against a running gateway.

use crate::support::{Server, bin};
use std::process::Command;

fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(bin()).args(args).envs(env.iter().copied()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_tells_the_story() {
    let (ok, out, err) = run(&["demo"], &[]);
    assert!(ok, "{err}");
    assert!(out.contains("exactly one notice"));
    assert!(out.contains("changed (other actor)"));
    assert!(out.contains("\"historyGap\": false"));
}

#[test]
fn db_commands_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("log.db");
    let db = db.to_str().unwrap();
    let (ok, out, err) = run(&["db", "--db", db, "--json", "record", "agent:main:worker", "human"], &[]);
    assert!(ok, "{err}");
    assert!(out.contains("\"recorded\": false"), "an unwatched human turn writes nothing: {out}");
    let (ok, out, _) =
        run(&["db", "--db", db, "--json", "watch", "agent:main:main", "agent:main:worker"], &[]);
    assert!(ok && out.contains("\"watched\": true"), "{out}");
    for _ in 0..3 {
        let (ok, out, _) = run(
            &["db", "--db", db, "--json", "record", "agent:main:worker", "human", "--channel", "slack"],
            &[],
        );
        assert!(ok && out.contains("\"recorded\": true"), "{out}");
    }
    let (ok, out, _) = run(&["db", "--db", db, "--json", "drain", "agent:main:main"], &[]);
    assert!(ok);
    assert_eq!(out.matches("changed (other actor)").count(), 1, "{out}");
    assert!(out.contains("changesSince 0"));
    let (ok, out, _) = run(&["db", "--db", db, "--json", "status", "agent:main:worker", "--since", "1"], &[]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stateVersion"], 3);
    assert_eq!(v["stateChanges"]["events"].as_array().unwrap().len(), 2);
    let (ok, _, _) = run(&["db", "--db", db, "prune"], &[]);
    assert!(ok);
    // A corrupt file is refused, not replaced.
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, b"definitely not sqlite").unwrap();
    let (ok, _, err) = run(&["db", "--db", bad.to_str().unwrap(), "status", "agent:main:x"], &[]);
    assert!(!ok);
    assert!(err.contains("not a usable sessionwatch database"), "{err}");
    assert_eq!(std::fs::read(&bad).unwrap(), b"definitely not sqlite");
}

#[tokio::test]
async fn client_commands_against_a_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let data = dir.path().to_str().unwrap().to_string();
    let url = server.base.clone();
    // The subcommand first, then the connection flags, then its own arguments.
    let cli = move |args: &[&str]| {
        let out = Command::new(bin())
            .arg(args[0])
            .args(["--url", url.as_str(), "--data-dir", data.as_str()])
            .args(&args[1..])
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, out) = cli(&["create", "agent:main:worker", "--json"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&["send", "agent:main:worker", "hello", "--watch", "--as", "agent:main:main"]);
    assert!(ok, "{out}");
    assert!(out.contains("watched: true"), "{out}");
    let (ok, _) = cli(&["inbound", "agent:main:worker", "a human", "--channel", "slack"]);
    assert!(ok);
    let (ok, out) = cli(&["turn", "agent:main:main"]);
    assert!(ok);
    assert!(out.contains("changed (other actor)"), "{out}");
    let (ok, out) = cli(&["status", "agent:main:worker", "--since", "0"]);
    assert!(ok);
    assert!(out.contains("Session state changes:"), "{out}");
    let (ok, _) = cli(&["status", "agent:main:nobody"]);
    assert!(!ok, "an unknown session is an error exit");
}
