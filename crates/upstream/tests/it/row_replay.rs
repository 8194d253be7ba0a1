//! The JSONL sources' real files (Claude Code, Codex and Pi in tests/fixtures/<cli>/, and the Codex
//! steer case in codex-cases/) written again into a copy one row, then one half row, at a time, with a
//! tick after each write, and once whole: every typed turn is found once, nothing else is, and the
//! answer does not depend on where the ticks fall. (Gemini: gemini_cases.rs; OpenCode, whose store is a
//! database: opencode_cases.rs.)

use crate::common::{PRINT_TURNS, Rewrite, TUI_TURNS, fixture_home, fixture_root};
use sessionwatch_upstream::text::NormText;
use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe, adopt, check, codex};
use std::path::Path;

/// What the ticks found: the number of human turns, and the turn id reported with each activity.
struct Found {
    turns: u32,
    turn_ids: Vec<Option<String>>,
}

/// Writes `file` into a fresh copy in `pieces` per row (0: all at once), ticking after each write.
fn replay(cat: CatalogId, file: &Path, pieces: usize) -> Found {
    let rewrite = Rewrite::of(file);
    let reference = &rewrite.reference;
    let bytes = &rewrite.bytes;
    let mut marker = Rewrite::start_marker();
    let mut found = Found { turns: 0, turn_ids: vec![] };
    let mut tick = |marker: &mut String| {
        let probe = Probe { reference_json: reference, marker_json: marker, own_recent_user_texts: &[] };
        match check(cat, &probe) {
            CheckOutcome::Activity { human_turns, next_marker_json, turn_id, .. } => {
                if human_turns > 0 {
                    found.turns += human_turns;
                    found.turn_ids.push(turn_id);
                }
                *marker = next_marker_json;
            }
            CheckOutcome::NoChange => {}
            o => panic!("{}: {o:?}", file.display()),
        }
    };
    let chunks: Vec<&[u8]> = if pieces == 0 {
        vec![&bytes[..]]
    } else {
        bytes
            .split_inclusive(|b| *b == b'\n')
            .flat_map(|line| line.chunks(line.len().div_ceil(pieces)))
            .collect()
    };
    for chunk in chunks {
        rewrite.write(chunk);
        tick(&mut marker);
    }
    tick(&mut marker);
    found
}

fn session_file(cli: &str, cat: CatalogId, id: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, homes) = fixture_home(cli);
    let a = adopt(&homes, cat, id).unwrap_or_else(|e| panic!("{cli} {id}: {e}"));
    (dir, a.entry.location.into())
}

#[test]
fn every_typed_turn_is_found_once_wherever_the_ticks_fall() {
    let cases = [
        ("claude", CatalogId::Claude, "dabdface-a74f-47e7-a565-02a8eb260f31", PRINT_TURNS.len()),
        ("claude", CatalogId::Claude, "5ae04bcf-dcae-4d38-b508-e94477a366c6", TUI_TURNS.len()),
        ("codex", CatalogId::Codex, "01a2361a-df64-7aa1-a8f6-d12f148e569f", PRINT_TURNS.len()),
        ("codex", CatalogId::Codex, "01a2361a-e5e2-70d2-8b99-d92b15fbab55", TUI_TURNS.len()),
        ("pi", CatalogId::Pi, "01a2361b-d39f-759d-9272-bf2c2772ea6a", PRINT_TURNS.len()),
        ("pi", CatalogId::Pi, "01a2361b-e99f-7755-a26e-cb8e6819ce44", TUI_TURNS.len()),
    ];
    for (cli, cat, id, turns) in cases {
        let (_dir, file) = session_file(cli, cat, id);
        for pieces in [0, 1, 2, 3] {
            let found = replay(cat, &file, pieces);
            assert_eq!(found.turns as usize, turns, "{cli} {id}, {pieces} writes per row");
        }
    }
}

/// The Codex steer case: `(file, typed texts)` from its truth file.
fn steer_case() -> (std::path::PathBuf, Vec<String>) {
    let dir = fixture_root().join("codex-cases/steer");
    let truth = std::fs::read_to_string(dir.join("truth.txt")).unwrap();
    let id = truth.lines().next().unwrap().strip_prefix("session ").unwrap().to_string();
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(&format!("{id}.jsonl")))
        .unwrap();
    (file, truth.lines().skip(1).map(str::to_string).collect())
}

#[test]
fn a_codex_steer_is_a_turn_of_its_own_wherever_the_ticks_fall() {
    // Typed while the agent answered the first prompt: Codex puts it into the running turn, with that
    // turn's id. It was once taken for the prompt's duplicate when it landed in a later tick.
    let (file, typed) = steer_case();
    assert_eq!(typed.len(), 3);
    for pieces in [1, 2, 3] {
        let found = replay(CatalogId::Codex, &file, pieces);
        assert_eq!(found.turns, 3, "{pieces} writes per row");
        let ids: Vec<String> = found.turn_ids.into_iter().map(Option::unwrap).collect();
        // Each under the key its hook derives from `turn_id` and `prompt`.
        for (id, text) in ids.iter().zip(&typed) {
            let turn = id.split(':').next().unwrap();
            assert_eq!(id, &codex::human_turn_key(turn, &NormText::of(text)));
        }
        let turn_of = |i: usize| ids[i].split(':').next().unwrap().to_string();
        assert_eq!(turn_of(0), turn_of(1), "the steer joined the prompt's turn");
        assert_ne!(turn_of(1), turn_of(2));
        assert_ne!(ids[0], ids[1], "the steer is not the prompt's duplicate");
    }
    assert_eq!(replay(CatalogId::Codex, &file, 0).turns, 3, "read in one tick");
}
