//! `sessionwatch bench upstream`: classifier throughput per source.
//!
//! Generates synthetic transcripts shaped like the real ones into a temporary directory and
//! times (a) the classifier scan window by window, as the monitor runs it, and (b) a plain
//! read-and-count-newlines pass over the same file, the floor any scanner can reach; plus the
//! OpenCode check rate on a generated database.

use crate::{Figure, progress_bar};
use serde_json::json;
use sessionwatch_upstream::jsonl::{self, RowClassifier};
use sessionwatch_upstream::text::OwnTexts;
use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe, check_opencode_batch};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Result of one JSONL scan measurement.
#[derive(Clone, Debug)]
pub struct ScanRate {
    pub catalog: CatalogId,
    pub bytes: u64,
    /// Rows classified as human-shaped.
    pub humans: u64,
    pub classify_secs: f64,
    pub newline_secs: f64,
}

/// Result of one OpenCode measurement.
#[derive(Clone, Debug)]
pub struct OpenCodeRate {
    pub messages: usize,
    pub human_turns: u32,
    pub check_secs: f64,
    pub indicator_only_secs: f64,
}

fn filler(n: usize) -> String {
    "lorem ipsum dolor sit amet ".repeat(n / 27 + 1)[..n].to_string()
}

/// Write about `bytes` of a transcript for `catalog`; returns the number of human turns.
pub fn generate_transcript(catalog: CatalogId, path: &Path, bytes: u64) -> io::Result<u64> {
    let mut w = BufWriter::new(File::create(path)?);
    let mut written = 0u64;
    let mut humans = 0u64;
    let mut i = 0u64;
    let big = filler(60_000);
    let small = filler(800);
    if catalog == CatalogId::Pi {
        let h = json!({"type":"session","version":3,"id":"bench","timestamp":"2026-04-02T09:30:00.123Z","cwd":"/bench"});
        let line = h.to_string();
        writeln!(w, "{line}")?;
        written += line.len() as u64 + 1;
    }
    while written < bytes {
        i += 1;
        let ts = "2026-04-02T09:15:02.114Z";
        let rows: Vec<serde_json::Value> = match catalog {
            CatalogId::Claude => vec![
                json!({"type":"user","uuid":format!("u{i}"),"sessionId":"s","timestamp":ts,"userType":"external","isSidechain":false,"message":{"role":"user","content":format!("prompt number {i}: {small}")}}),
                json!({"type":"attachment","attachment":{"type":"prompt_snapshot","text":big},"timestamp":ts}),
                json!({"type":"assistant","uuid":format!("a{i}"),"timestamp":ts,"message":{"role":"assistant","content":[{"type":"text","text":small}]}}),
                json!({"type":"user","uuid":format!("t{i}"),"timestamp":ts,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":small}]}}),
            ],
            CatalogId::Codex => vec![
                json!({"timestamp":ts,"type":"event_msg","payload":{"type":"task_started","turn_id":format!("turn{i}")}}),
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":big}]}}),
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":format!("prompt {i} {small}")}]}}),
                json!({"timestamp":ts,"type":"event_msg","payload":{"type":"item_completed","turn_id":format!("turn{i}"),"item":{"type":"UserMessage","content":[{"type":"text","text":format!("prompt {i} {small}")}]}}}),
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":small}]}}),
            ],
            CatalogId::Gemini => vec![
                json!({"id":format!("u{i}"),"timestamp":ts,"type":"user","content":[{"text":format!("prompt {i} {small}")}]}),
                json!({"$set":{"lastUpdated":ts}}),
                json!({"id":format!("a{i}"),"timestamp":ts,"type":"gemini","content":big,"thoughts":[],"model":"m"}),
                json!({"id":format!("r{i}"),"timestamp":ts,"type":"user","content":[{"functionResponse":{"name":"x","response":{"output":small}}}]}),
            ],
            CatalogId::Pi | CatalogId::OpenCode => vec![
                json!({"type":"message","id":format!("u{i}"),"parentId":null,"timestamp":ts,"message":{"role":"user","content":[{"type":"text","text":format!("prompt {i} {small}")}],"timestamp":1775122205000u64}}),
                json!({"type":"message","id":format!("a{i}"),"parentId":null,"timestamp":ts,"message":{"role":"assistant","content":[{"type":"text","text":big}]}}),
                json!({"type":"message","id":format!("r{i}"),"parentId":null,"timestamp":ts,"message":{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":small}]}}),
            ],
        };
        for r in rows {
            let line = r.to_string();
            writeln!(w, "{line}")?;
            written += line.len() as u64 + 1;
        }
        humans += 1;
    }
    w.flush()?;
    Ok(humans)
}

fn classifier(catalog: CatalogId) -> Box<dyn RowClassifier> {
    match catalog {
        CatalogId::Claude => Box::new(sessionwatch_upstream::claude::ClaudeClassifier::default()),
        CatalogId::Codex => Box::new(sessionwatch_upstream::codex::CodexClassifier::default()),
        _ => Box::new(sessionwatch_upstream::pi::PiClassifier),
    }
}

/// Time a full classification scan (window by window) and a newline-count pass.
pub fn scan_file(catalog: CatalogId, path: &Path) -> io::Result<ScanRate> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    let own = OwnTexts::new(&["not in the file".to_string()]);
    let mut cls = classifier(catalog);
    let t0 = Instant::now();
    let mut offset = 0u64;
    let mut humans = 0u64;
    while offset < size {
        let t =
            jsonl::classify_window(&mut file, size, offset, humans, 0, jsonl::WINDOW, cls.as_mut(), &own)?;
        if t.end == offset {
            break;
        }
        humans = t.humans;
        offset = t.end;
    }
    let classify_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; jsonl::WINDOW];
    let mut lines = 0usize;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count();
    }
    std::hint::black_box(lines);
    let newline_secs = t1.elapsed().as_secs_f64();
    Ok(ScanRate { catalog, bytes: size, humans, classify_secs, newline_secs })
}

/// Generate a ~`mib` MiB transcript for each JSONL source and measure both passes.
pub fn jsonl_rates(mib: u64) -> io::Result<Vec<ScanRate>> {
    let dir = tempfile::tempdir()?;
    let mut out = Vec::new();
    for c in [CatalogId::Claude, CatalogId::Codex, CatalogId::Pi] {
        let p = dir.path().join(format!("{}.jsonl", c.as_str()));
        generate_transcript(c, &p, mib * 1024 * 1024)?;
        out.push(scan_file(c, &p)?);
    }
    Ok(out)
}

/// Adds to the OpenCode-shaped database at `path` (created if new) session `session` with `messages`
/// messages (half of them user prompts).
pub fn build_opencode_db(path: &Path, session: &str, messages: usize) -> rusqlite::Result<()> {
    let mut conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE IF NOT EXISTS session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT,
            slug TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER,
            time_updated INTEGER, time_archived INTEGER);
         CREATE TABLE IF NOT EXISTS message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS message_session_time_created_id_idx ON message (session_id, time_created, id);
         CREATE TABLE IF NOT EXISTS part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
            session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
            data TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS part_message_id_id_idx ON part (message_id, id);
         CREATE INDEX IF NOT EXISTS part_session_idx ON part (session_id);
         CREATE TABLE IF NOT EXISTS event_sequence (aggregate_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, owner_id TEXT);",
    )?;
    let tx = conn.transaction()?;
    tx.execute(
        "INSERT OR REPLACE INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)
         VALUES (?1, 'prj', 'bench', '/bench', 'bench session', '1.18.33', 1, 2)",
        [session],
    )?;
    let filler = filler(400);
    for i in 0..messages {
        let id = format!("msg_{session}_{i:010}");
        let user = i % 2 == 0;
        let data = if user {
            json!({"role":"user","time":{"created":1000 + i}})
        } else {
            json!({"role":"assistant","time":{"created":1000 + i}})
        };
        tx.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
            rusqlite::params![id, session, 1000 + i as i64, data.to_string()],
        )?;
        let text = if user { format!("human prompt {i}") } else { filler.clone() };
        tx.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, 1, 1, ?4)",
            rusqlite::params![format!("prt_{session}_{i:010}"), id, session, json!({"type":"text","text":text}).to_string()],
        )?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO event_sequence (aggregate_id, seq) VALUES (?1, ?2)",
        rusqlite::params![session, messages as i64 * 3],
    )?;
    tx.commit()?;
    Ok(())
}

/// Build a db with `messages` messages and time one full check from an empty marker, and one
/// indicator-only check (sequence unchanged).
pub fn opencode_rate(messages: usize) -> Result<OpenCodeRate, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("opencode.db");
    let session = "ses_bench";
    build_opencode_db(&db, session, messages).map_err(|e| e.to_string())?;
    let reference = json!({"dbPath": db.to_string_lossy(), "threadId": session}).to_string();
    let marker = json!({"seq": 0, "lastHumanMessageId": null}).to_string();
    let own: Vec<String> = Vec::new();
    let probe = Probe { reference_json: &reference, marker_json: &marker, own_recent_user_texts: &own };
    let t0 = Instant::now();
    let out = check_opencode_batch(&db, &[probe]);
    let check_secs = t0.elapsed().as_secs_f64();
    let (human_turns, next) = match out.first() {
        Some(CheckOutcome::Activity { human_turns, next_marker_json, .. }) => {
            (*human_turns, next_marker_json.clone())
        }
        other => return Err(format!("unexpected outcome {other:?}")),
    };
    let probe2 = Probe { marker_json: &next, ..probe };
    let t1 = Instant::now();
    let _ = check_opencode_batch(&db, &[probe2]);
    let indicator_only_secs = t1.elapsed().as_secs_f64();
    Ok(OpenCodeRate { messages, human_turns, check_secs, indicator_only_secs })
}

const MB: f64 = 1_000_000.0;

/// Generates the inputs (with a progress bar): a `bytes` transcript per JSONL source and an OpenCode
/// database of `messages` messages; then measures.
pub fn run(bytes: u64, messages: usize) -> anyhow::Result<Vec<Figure>> {
    let dir = tempfile::tempdir()?;
    let sources = [CatalogId::Claude, CatalogId::Codex, CatalogId::Pi];
    let mut out = Vec::new();
    let (mut total_bytes, mut total_read_secs) = (0u64, 0f64);
    for c in sources {
        let path = dir.path().join(format!("{}.jsonl", c.as_str()));
        generate_with_progress(c, &path, bytes)?;
        let r = scan_file(c, &path)?;
        std::fs::remove_file(&path)?;
        let scan = r.bytes as f64 / MB / r.classify_secs.max(1e-9);
        let read = r.bytes as f64 / MB / r.newline_secs.max(1e-9);
        total_bytes += r.bytes;
        total_read_secs += r.newline_secs;
        let n = c.as_str();
        out.push(Figure::new(format!("{n}_transcript_mb"), r.bytes as f64 / MB, "MB"));
        out.push(Figure::new(format!("{n}_scan_mb_per_s"), scan, "MB/s"));
        out.push(Figure::new(format!("{n}_read_only_mb_per_s"), read, "MB/s"));
        out.push(Figure::new(format!("{n}_scan_vs_read_only"), scan / read.max(1e-9), "ratio"));
    }
    out.push(Figure::new("read_only_mb_per_s", total_bytes as f64 / MB / total_read_secs.max(1e-9), "MB/s"));
    let pb = progress_bar(messages as u64, "opencode db");
    pb.enable_steady_tick(Duration::from_millis(200));
    let o = opencode_rate(messages).map_err(anyhow::Error::msg)?;
    pb.finish_and_clear();
    out.push(Figure::new("opencode_messages", o.messages as f64, "messages"));
    out.push(Figure::new(
        "opencode_check_messages_per_s",
        o.messages as f64 / o.check_secs.max(1e-9),
        "messages/s",
    ));
    out.push(Figure::new("opencode_full_check_ms", o.check_secs * 1000.0, "ms"));
    out.push(Figure::new("opencode_indicator_tick_ms", o.indicator_only_secs * 1000.0, "ms"));
    Ok(out)
}

/// Writes the transcript while a bar follows the file's size.
fn generate_with_progress(c: CatalogId, path: &Path, bytes: u64) -> anyhow::Result<()> {
    let pb = progress_bar(bytes, &format!("gen {}", c.as_str()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (pb, done, path) = (pb.clone(), done.clone(), path.to_path_buf());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(m) = std::fs::metadata(&path) {
                    pb.set_position(m.len().min(bytes));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let result = generate_transcript(c, path, bytes);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    pb.finish_and_clear();
    result?;
    Ok(())
}
