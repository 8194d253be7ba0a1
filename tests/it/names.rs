//! Sessions by name (issue 34 item 5): `sessionwatch sessions` shows what the hooks said (source, cwd,
//! state), tool commands take a session-id prefix or a label, and `watch TARGET --as WATCHER` registers a
//! watch from the shell that a human prompt on the target then notifies once.

use crate::cli::hook_in;
use crate::support::{Server, client};
use serde_json::{Value, json};
use std::path::Path;

const ALPHA: &str = "3f2a0c1d-1111-4a5b-8c6d-7e8f9a0b1c2d";
const BETA: &str = "3f2b9e8d-2222-4a5b-8c6d-7e8f9a0b1c2d";

fn hook(home: &Path, cli: &str, event: &str, input: Value) {
    let mut input = input;
    input["hook_event_name"] = event.into();
    let (ok, out, err) = hook_in(home, &[event, "--agent", cli], &input.to_string(), &[]);
    assert!(ok && err.is_empty(), "{event}: {out} {err}");
}

/// The listed session whose key ends with `id`.
fn listed(home: &Path, id: &str) -> Value {
    let (ok, out, err) = client(home, &["sessions", "--json"]);
    assert!(ok, "{out} {err}");
    let listing: Value = serde_json::from_str(&out).unwrap();
    let found = listing["sessions"].as_array().unwrap().iter().find(|s| s["nativeId"] == id).cloned();
    found.unwrap_or_else(|| panic!("{id} not in {listing}"))
}

#[tokio::test]
async fn sessions_by_name_from_hooks_to_a_watch() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let server = Server::start(home);
    hook(home, "claude", "SessionStart", json!({ "session_id": ALPHA, "cwd": "/work/alpha" }));
    hook(home, "codex", "SessionStart", json!({ "session_id": BETA, "cwd": "/work/beta" }));

    let alpha = listed(home, ALPHA);
    assert_eq!(alpha["sessionKey"], format!("agent:main:claude:{ALPHA}"));
    assert_eq!(
        (&alpha["source"], &alpha["cwd"], &alpha["state"]),
        (&json!("claude"), &json!("/work/alpha"), &json!("waiting"))
    );
    let beta = listed(home, BETA);
    assert_eq!((&beta["source"], &beta["cwd"]), (&json!("codex"), &json!("/work/beta")));

    // The hook lifecycle moves the state: a prompt runs a turn, Stop hands it back to the user.
    let prompt = |text: &str, id: &str| json!({ "session_id": ALPHA, "cwd": "/work/alpha", "prompt": text, "prompt_id": id });
    hook(home, "claude", "UserPromptSubmit", prompt("build it", "p1"));
    assert_eq!(listed(home, ALPHA)["state"], "running");
    hook(
        home,
        "claude",
        "Stop",
        json!({ "session_id": ALPHA, "cwd": "/work/alpha", "stop_hook_active": false }),
    );
    assert_eq!(listed(home, ALPHA)["state"], "waiting");

    // The table for people names them all.
    let (ok, table, err) = client(home, &["sessions"]);
    assert!(ok, "{err}");
    let line = table.lines().find(|l| l.contains(ALPHA)).unwrap_or_else(|| panic!("{table}"));
    for cell in ["claude", "3f2a0c1d", "waiting", "/work/alpha"] {
        assert!(line.contains(cell), "{cell} missing: {table}");
    }

    // A unique id prefix is a name; an ambiguous one lists its candidates; an unknown one is refused.
    let (ok, out, err) = client(home, &["status", "3f2a"]);
    assert!(ok && out.contains(&format!("agent:main:claude:{ALPHA}")), "{out} {err}");
    let (ok, _, err) = client(home, &["status", "3f2"]);
    assert!(!ok && err.contains(ALPHA) && err.contains(BETA), "{err}");
    let (ok, _, err) = client(home, &["status", "nobody"]);
    assert!(!ok && err.contains("no session is named \"nobody\""), "{err}");

    // A labelled gateway session watches alpha, both by name.
    let (ok, out, err) = client(home, &["create", "agent:main:reviewer", "--label", "reviewer"]);
    assert!(ok, "{out} {err}");
    let (ok, out, err) = client(home, &["watch", "3f2a", "--as", "reviewer"]);
    assert!(ok, "{out} {err}");
    let head = alpha_version(home);
    assert_eq!(
        out.trim(),
        format!("agent:main:reviewer watches agent:main:claude:{ALPHA} from state version {head}")
    );
    let (ok, out, _) = client(home, &["watch", "3f2a", "--as", "reviewer"]);
    assert!(ok && out.contains("was already watching"), "{out}");
    let (ok, _, err) = client(home, &["watch", "reviewer", "--as", "reviewer"]);
    assert!(!ok && err.contains("self-watch"), "{err}");

    // A human prompt on alpha: the watcher gets one notice.
    hook(home, "claude", "UserPromptSubmit", prompt("now the tests", "p2"));
    let notices = server.turn("agent:main:reviewer").await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains(ALPHA), "{notices:?}");

    // The CLI's session ends: idle.
    hook(home, "claude", "SessionEnd", json!({ "session_id": ALPHA, "cwd": "/work/alpha" }));
    assert_eq!(listed(home, ALPHA)["state"], "idle");
}

fn alpha_version(home: &Path) -> u64 {
    listed(home, ALPHA)["stateVersion"].as_u64().unwrap()
}
