use crate::fixture_tree::copy_dir;
use sessionwatch_upstream::{CatalogId, CheckOutcome, Homes, Probe, check};
use std::path::{Path, PathBuf};

pub fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A writable copy of `<cli>/home` in a temp dir.
pub fn fixture_home(cli: &str) -> (tempfile::TempDir, Homes) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_root().join(cli).join("home"), dir.path());
    let homes = Homes::with_home(dir.path());
    (dir, homes)
}

/// Run ticks until nothing changes; returns (turns, final marker, ticks).
pub fn drain(cat: CatalogId, reference: &str, marker: &str, own: &[String]) -> (u32, String, usize) {
    let mut marker = marker.to_string();
    let mut turns = 0;
    for ticks in 0..100_000 {
        let probe = Probe { reference_json: reference, marker_json: &marker, own_recent_user_texts: own };
        match check(cat, &probe) {
            CheckOutcome::Activity { human_turns, next_marker_json, occurred_at_ms, .. } => {
                if human_turns > 0 {
                    assert!(occurred_at_ms.is_some(), "activity without a time");
                }
                turns += human_turns;
                marker = next_marker_json;
            }
            CheckOutcome::NoChange => return (turns, marker, ticks),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    panic!("did not settle");
}

pub fn own(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|s| s.to_string()).collect()
}

pub fn offset_of(marker: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(marker).unwrap();
    v["offset"].as_u64().unwrap()
}

pub fn file_ref(path: &Path) -> String {
    serde_json::json!({ "filePath": path.to_string_lossy() }).to_string()
}

/// A JSONL file written again, piece by piece, into an empty copy of the same name in a temp dir.
pub struct Rewrite {
    /// The original's bytes.
    pub bytes: Vec<u8>,
    pub copy: PathBuf,
    /// The copy's upstream reference.
    pub reference: String,
    _dir: tempfile::TempDir,
}

impl Rewrite {
    pub fn of(file: &Path) -> Rewrite {
        let bytes = std::fs::read(file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(file.file_name().unwrap());
        std::fs::File::create(&copy).unwrap();
        Rewrite { bytes, reference: file_ref(&copy), copy, _dir: dir }
    }

    /// The marker of an adoption at the start of the file.
    pub fn start_marker() -> String {
        r#"{"offset":0,"humans":0}"#.to_string()
    }

    pub fn write(&self, piece: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(&self.copy).unwrap().write_all(piece).unwrap();
    }
}

pub fn append(path: &Path, s: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

pub const PRINT_TURNS: [&str; 3] = [
    "Please say hello. This is turn one.",
    "Second turn, typed by a human: thanks, please continue.",
    "Third turn: RUN-TOOL please run the echo command.",
];
pub const TUI_TURNS: [&str; 2] = [
    "Hello from the keyboard: typed into the TUI, first prompt.",
    "Typed into the resumed TUI: a second human prompt.",
];
