//! Missing versus inconclusive.

use crate::common::*;
use serde_json::json;
use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe, check, io_outcome};
use std::io;
use std::path::Path;

const START: &str = r#"{"offset":0,"humans":0}"#;

fn outcome(cat: CatalogId, reference: &str) -> CheckOutcome {
    check(cat, &Probe { reference_json: reference, marker_json: START, own_recent_user_texts: &[] })
}

#[test]
fn deleted_file_and_directory_are_missing() {
    for cat in [CatalogId::Claude, CatalogId::Pi, CatalogId::Codex] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rollout-2026-04-02T09-20-00-0196f0a0-1111-7222-8333-444455556666.jsonl");
        std::fs::write(&p, "{}\n").unwrap();
        let r = json!({"filePath": p.to_string_lossy(), "codexHome": d.path().to_string_lossy()}).to_string();
        assert!(matches!(outcome(cat, &r), CheckOutcome::Activity { .. }));
        std::fs::remove_file(&p).unwrap();
        assert_eq!(outcome(cat, &r), CheckOutcome::Missing, "{cat}");
        std::fs::create_dir(&p).unwrap();
        assert_eq!(outcome(cat, &r), CheckOutcome::Missing, "{cat}: not a regular file");
        // A parent that is a file (ENOTDIR) is gone too.
        let under = d.path().join("file");
        std::fs::write(&under, "x").unwrap();
        let r2 = file_ref(&under.join("s.jsonl"));
        assert_eq!(outcome(cat, &r2), CheckOutcome::Missing, "{cat}");
    }
}

#[test]
fn read_errors_are_inconclusive() {
    // A symlink loop (ELOOP) is an error we can produce as root; it is not evidence of deletion.
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.jsonl");
    let b = d.path().join("b.jsonl");
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    for cat in [CatalogId::Claude, CatalogId::Pi, CatalogId::Codex] {
        assert!(matches!(outcome(cat, &file_ref(&a)), CheckOutcome::Inconclusive(_)), "{cat}");
    }
    let p = Path::new("/x");
    for kind in [
        io::ErrorKind::PermissionDenied,
        io::ErrorKind::Interrupted,
        io::ErrorKind::Other,
        io::ErrorKind::InvalidData,
    ] {
        assert!(matches!(io_outcome(&io::Error::from(kind), p), CheckOutcome::Inconclusive(_)), "{kind:?}");
    }
    assert_eq!(io_outcome(&io::Error::from(io::ErrorKind::NotFound), p), CheckOutcome::Missing);
    assert_eq!(
        io_outcome(&io::Error::from_raw_os_error(13), p),
        CheckOutcome::Inconclusive(format!("/x: {}", io::Error::from_raw_os_error(13)))
    );
    // Bad references and markers are inconclusive, never missing.
    assert!(matches!(outcome(CatalogId::Claude, "not json"), CheckOutcome::Inconclusive(_)));
    let f = d.path().join("ok.jsonl");
    std::fs::write(&f, "{}\n").unwrap();
    let bad = check(
        CatalogId::Claude,
        &Probe { reference_json: &file_ref(&f), marker_json: "{}", own_recent_user_texts: &[] },
    );
    assert!(matches!(bad, CheckOutcome::Inconclusive(_)));
}

#[test]
fn codex_archived_or_compressed_rollouts_are_not_missing() {
    let d = tempfile::tempdir().unwrap();
    let name = "rollout-2026-04-02T09-20-00-0196f0a0-1111-7222-8333-444455556666.jsonl";
    let live = d.path().join("sessions/2026/04/02");
    std::fs::create_dir_all(&live).unwrap();
    let p = live.join(name);
    let r = json!({"filePath": p.to_string_lossy(), "codexHome": d.path().to_string_lossy()}).to_string();
    // Compressed in place.
    std::fs::write(format!("{}.zst", p.display()), b"\x28\xb5\x2f\xfd").unwrap();
    assert!(matches!(outcome(CatalogId::Codex, &r), CheckOutcome::Inconclusive(_)));
    std::fs::remove_file(format!("{}.zst", p.display())).unwrap();
    // Archived: read from its new place.
    let arch = d.path().join("archived_sessions");
    std::fs::create_dir_all(&arch).unwrap();
    let line = json!({"timestamp":"2026-04-02T09:20:05.301Z","type":"event_msg","payload":{"type":"user_message","message":"archived prompt"}});
    std::fs::write(arch.join(name), format!("{line}\n")).unwrap();
    match outcome(CatalogId::Codex, &r) {
        CheckOutcome::Activity { human_turns, .. } => assert_eq!(human_turns, 1),
        o => panic!("{o:?}"),
    }
    std::fs::remove_file(arch.join(name)).unwrap();
    assert_eq!(outcome(CatalogId::Codex, &r), CheckOutcome::Missing);
}

#[test]
fn opencode_database_gone_is_missing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("opencode.db");
    let r = json!({"dbPath": db.to_string_lossy(), "threadId": "ses_x"}).to_string();
    let p = Probe {
        reference_json: &r,
        marker_json: r#"{"seq":0,"lastHumanMessageId":null}"#,
        own_recent_user_texts: &[],
    };
    assert_eq!(check(CatalogId::OpenCode, &p), CheckOutcome::Missing);
    // Not a database: inconclusive, not missing.
    std::fs::write(&db, b"garbage garbage garbage garbage").unwrap();
    assert!(matches!(check(CatalogId::OpenCode, &p), CheckOutcome::Inconclusive(_)));
}
