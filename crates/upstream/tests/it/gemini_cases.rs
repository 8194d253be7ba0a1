//! Real Gemini CLI 0.61.0 chat files (`tests/fixtures/gemini-cases/`, made by
//! `tests/agents/gemini/make-fixtures.sh` against the fake Gemini API), each with a `truth.txt`: the
//! sessions and the prompts a human typed. A session's file is written again into a copy one row at a
//! time, and one half row at a time, with a tick after each write: every typed prompt is found once,
//! nothing else is, and the turn id the `BeforeAgent` hook derives before the CLI writes a prompt is the
//! one the monitor reads from its row.

use crate::common::{Rewrite, fixture_root};
use crate::fixture_tree::copy_dir;
use sessionwatch_upstream::{CatalogId, CheckOutcome, Homes, Probe, adopt, check, discover, gemini};
use std::path::{Path, PathBuf};

fn case_home(case: &str) -> PathBuf {
    fixture_root().join("gemini-cases").join(case).join("home")
}

/// `(session id, typed prompts)` of a case's live sessions, from its truth file.
fn truth(case: &str) -> Vec<(String, Vec<String>)> {
    let text =
        std::fs::read_to_string(fixture_root().join("gemini-cases").join(case).join("truth.txt")).unwrap();
    let mut out: Vec<(String, Vec<String>)> = vec![];
    for line in text.lines() {
        match line.strip_prefix("session ") {
            Some(rest) if rest.contains("(deleted") => out.push((String::new(), vec![])),
            Some(rest) => out.push((rest.trim().to_string(), vec![])),
            None => out.last_mut().unwrap().1.push(line.to_string()),
        }
    }
    out.retain(|(id, _)| !id.is_empty());
    out
}

fn homes_at(home: &Path) -> Homes {
    Homes { gemini_cli_home: Some(home.to_path_buf()), ..Homes::with_home("/nonexistent") }
}

/// Write `file`'s rows into a fresh copy in `pieces` per row, ticking after each. Returns the prompt
/// texts of the human turns found (each tick counts at most one here: the rows come one at a time).
fn replay(file: &Path, pieces: usize) -> Vec<String> {
    let rewrite = Rewrite::of(file);
    let reference = &rewrite.reference;
    let mut marker = Rewrite::start_marker();
    let mut found = vec![];
    for line in rewrite.bytes.split_inclusive(|b| *b == b'\n') {
        let row: Option<serde_json::Value> = serde_json::from_slice(line).ok();
        let prompt = row.as_ref().and_then(gemini::human_text).map(|t| t.prefix);
        // What `BeforeAgent` records: computed before the CLI writes the row.
        let hook_turn = prompt.as_ref().map(|p| gemini::turn_id_now(reference, &marker, p).unwrap());
        // The same when the monitor has not ticked since adoption (the hook reads the rows after it).
        let unticked =
            prompt.as_ref().map(|p| gemini::turn_id_now(reference, &Rewrite::start_marker(), p).unwrap());
        assert_eq!(hook_turn, unticked);
        let step = line.len().div_ceil(pieces);
        for chunk in line.chunks(step) {
            rewrite.write(chunk);
            let probe = Probe { reference_json: reference, marker_json: &marker, own_recent_user_texts: &[] };
            match check(CatalogId::Gemini, &probe) {
                CheckOutcome::Activity { human_turns, next_marker_json, turn_id, .. } => {
                    assert!(human_turns <= 1, "{}: one row holds at most one turn", file.display());
                    if human_turns == 1 {
                        assert_eq!(turn_id, hook_turn, "the hook's turn id is the monitor's");
                        found.push(prompt.clone().expect("a human turn from a row read as not human"));
                    }
                    marker = next_marker_json;
                }
                CheckOutcome::NoChange => {}
                o => panic!("{}: {o:?}", file.display()),
            }
        }
    }
    found
}

/// Each live session of a case: its own file replayed finds exactly its typed prompts.
fn check_case(case: &str) {
    let homes = homes_at(&case_home(case));
    for (id, prompts) in truth(case) {
        let adoption = adopt(&homes, CatalogId::Gemini, &id).unwrap();
        let file = PathBuf::from(&adoption.entry.location);
        assert!(file.is_file());
        for pieces in [1, 2, 3] {
            let found = replay(&file, pieces);
            let want: Vec<String> =
                prompts.iter().map(|p| sessionwatch_upstream::normalize_user_text(p)).collect();
            assert_eq!(found, want, "{case}: session {id}, each row written in {pieces} pieces");
        }
    }
}

#[test]
fn print_mode_and_a_resumed_tool_turn_are_found_once() {
    check_case("print");
}

#[test]
fn tui_prompts_before_and_after_a_resume_in_a_later_minute_are_found_once() {
    check_case("tui-resume");
}

#[test]
fn the_stray_file_of_a_resume_is_not_the_session() {
    let homes = homes_at(&case_home("tui-resume"));
    let (id, _) = truth("tui-resume").remove(0);
    let chats = gemini::list_files(&homes);
    assert_eq!(chats.len(), 2, "the session's file and the stray file");
    let adoption = adopt(&homes, CatalogId::Gemini, &id).unwrap();
    assert_eq!(adoption.entry.location, chats[0].to_string_lossy(), "the earliest file is the session's");
    assert_eq!(adoption.entry.cwd.as_deref(), Some("/home/user/work/demo"));
    // A hook naming the stray file adopts the session's own file.
    let by_hook = sessionwatch_upstream::adopt_transcript(CatalogId::Gemini, &id, &chats[1]).unwrap();
    assert_eq!(by_hook.entry.location, adoption.entry.location);
    let listed: Vec<_> = discover(&homes, &mut |_, _| {}).into_iter().filter(|e| e.thread_id == id).collect();
    assert_eq!(listed.len(), 1, "one catalog entry per session");
    assert_eq!(
        listed[0].title.as_deref(),
        Some("Hello from the keyboard: typed into the TUI, first prompt. NO-NOTICE")
    );
}

#[test]
fn a_session_deleted_by_the_retention_clean_up_is_missing() {
    // Adopt the TUI session while it exists, then let the store become what the CLI left after the
    // next session started: both of its files deleted.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&case_home("tui-resume"), dir.path());
    let homes = homes_at(dir.path());
    let (id, _) = truth("tui-resume").remove(0);
    let link = adopt(&homes, CatalogId::Gemini, &id).unwrap().link;
    let probe = Probe {
        reference_json: &link.reference_json,
        marker_json: &link.marker_json,
        own_recent_user_texts: &[],
    };
    assert_eq!(check(CatalogId::Gemini, &probe), CheckOutcome::NoChange);
    let chats = dir.path().join(".gemini/tmp/demo/chats");
    std::fs::remove_dir_all(&chats).unwrap();
    copy_dir(&case_home("retention").join(".gemini/tmp/demo/chats"), &chats);
    assert_eq!(check(CatalogId::Gemini, &probe), CheckOutcome::Missing);
    assert!(adopt(&homes, CatalogId::Gemini, &id).is_err());
    check_case("retention");
}
