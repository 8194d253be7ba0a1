//! Pi sessions (`<agentDir>/sessions/--<cwd>--/<time>_<uuid>.jsonl`, or a flat session dir).
//!
//! v3 files are append-only. Legacy v1/v2 files are read too; Pi rewrites them in place when it
//! opens them (migration), which the JSONL marker detects through the first-line fingerprint
//! and recovers from by rescanning above a floor of already-seen human rows.

use crate::json_stream::text_of;
use crate::jsonl::{self, RowClassifier, Verdict};
use crate::text::NormText;
use crate::time::json_ts_ms;
use crate::{Adoption, CatalogEntry, CatalogId, CheckOutcome, Homes, Probe, UpstreamError, UpstreamLink};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// Result of classifying one Pi row.
#[derive(Debug)]
pub enum PiRow {
    /// Not a JSON object: scanning stops before it.
    NotObject,
    Human(NormText, Option<i64>),
    Other,
}

pub fn classify_row(value: Option<&Value>) -> PiRow {
    let Some(v @ Value::Object(_)) = value else {
        return PiRow::NotObject;
    };
    if v.get("type").and_then(Value::as_str) != Some("message") {
        return PiRow::Other;
    }
    let Some(msg) = v.get("message") else {
        return PiRow::Other;
    };
    let ts = json_ts_ms(msg.get("timestamp")).or_else(|| json_ts_ms(v.get("timestamp")));
    match msg.get("role").and_then(Value::as_str) {
        Some("user") => {}
        // The human ran `!cmd` (or `!!cmd`): a human turn, as in the other sources.
        Some("bashExecution") => {
            let command = msg.get("command").and_then(Value::as_str).unwrap_or("");
            return PiRow::Human(NormText::of(&format!("!{command}")), ts);
        }
        _ => return PiRow::Other,
    }
    let text = match msg.get("content") {
        Some(c) => {
            if let Some(t) = text_of(c) {
                t.norm()
            } else if let Some(blocks) = c.as_array() {
                let parts: Vec<NormText> = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(text_of))
                    .map(|t| t.norm())
                    .collect();
                NormText::join(parts.iter())
            } else {
                NormText::default()
            }
        }
        None => NormText::default(),
    };
    PiRow::Human(text, ts)
}

#[derive(Debug, Default)]
pub struct PiClassifier;

impl RowClassifier for PiClassifier {
    fn may_matter(&self, _line: &[u8]) -> bool {
        true // every row must be validated (stop at the first non-object)
    }

    fn classify(&mut self, value: Option<&Value>, truncated: bool) -> Verdict {
        match classify_row(value) {
            PiRow::NotObject => Verdict::Stop,
            PiRow::Human(_, _) if truncated => Verdict::Ignore,
            PiRow::Human(t, ts) => Verdict::Human(t, ts),
            PiRow::Other => Verdict::Ignore,
        }
    }

    /// The user message's `message.timestamp` (ms): the Pi extension sends the same number for the
    /// prompt it records at `message_start` (the entry's own id does not exist yet then), so a prompt
    /// seen by both is one turn.
    fn turn_id(&self, row: &Value) -> Option<String> {
        turn_id(row)
    }

    fn load(&mut self, _: &Map<String, Value>) {}
    fn save(&self, _: &mut Map<String, Value>) {}
}

/// A Pi message row's turn id: its `message.timestamp` in milliseconds, as digits.
pub fn turn_id(row: &Value) -> Option<String> {
    let ts = row.get("message")?.get("timestamp")?;
    ts.as_u64()
        .or_else(|| ts.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
        .map(|t| t.to_string())
}

/// All session files: `<dir>/*.jsonl` and `<dir>/*/*.jsonl` for each session dir.
pub fn list_files(homes: &Homes) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in homes.pi_session_dirs() {
        for p in crate::read_dir_sorted(&root) {
            if p.is_dir() {
                for f in crate::read_dir_sorted(&p) {
                    if f.extension().is_some_and(|e| e == "jsonl") && f.is_file() {
                        out.push(f);
                    }
                }
            } else if p.extension().is_some_and(|e| e == "jsonl") && p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Session header: `(id, version, cwd)`.
pub fn header(path: &Path) -> Option<(String, u64, Option<String>)> {
    let mut out = None;
    let _ = jsonl::for_each_row(path, 1024 * 1024, &mut |row| {
        if let Some(r) = row
            && r.get("type").and_then(Value::as_str) == Some("session")
        {
            let id = r.get("id").and_then(Value::as_str).map(str::to_string);
            let version = r.get("version").and_then(Value::as_u64).unwrap_or(1);
            let cwd = r.get("cwd").and_then(Value::as_str).map(str::to_string);
            out = Some((id, version, cwd));
        }
        false
    });
    let (id, version, cwd) = out?;
    let id = id.or_else(|| id_from_name(path))?;
    Some((id, version, cwd))
}

fn id_from_name(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let (_, id) = stem.rsplit_once('_')?;
    (!id.is_empty()).then(|| id.to_string())
}

pub fn entry_for(path: &Path) -> Option<CatalogEntry> {
    let (id, _version, cwd) = header(path)?;
    let mut title = None;
    let mut first = None;
    let _ = jsonl::for_each_row(path, 4 * 1024 * 1024, &mut |row| {
        let Some(r) = row else { return false };
        if r.get("type").and_then(Value::as_str) == Some("session_info")
            && let Some(n) = r.get("name").and_then(Value::as_str)
        {
            title = crate::title_of(n);
        }
        if first.is_none()
            && let PiRow::Human(t, _) = classify_row(Some(r))
            && !t.is_empty()
        {
            first = crate::title_of(&t.prefix);
        }
        true
    });
    Some(CatalogEntry::of_file(CatalogId::Pi, id, title.or(first), cwd, path))
}

pub fn adopt(homes: &Homes, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let not_found = || UpstreamError::NotFound { catalog: CatalogId::Pi, thread: thread_id.to_string() };
    let files = list_files(homes);
    // Fast path: the id is the file name's tail; otherwise read headers (capped).
    let file = files
        .iter()
        .find(|f| id_from_name(f).as_deref() == Some(thread_id))
        .cloned()
        .or_else(|| {
            files.iter().take(10_000).find(|f| header(f).is_some_and(|(id, _, _)| id == thread_id)).cloned()
        })
        .ok_or_else(not_found)?;
    adopt_file(&file, thread_id)
}

/// Adopts the session file `file` (the one Pi's extension names): the thread must be its header's id.
pub fn adopt_file(file: &Path, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let not_found = || UpstreamError::NotFound { catalog: CatalogId::Pi, thread: thread_id.to_string() };
    let entry = entry_for(file).filter(|e| e.thread_id == thread_id).ok_or_else(not_found)?;
    let version = header(file).map(|h| h.1).unwrap_or(1);
    let marker = jsonl::baseline(file, &mut PiClassifier)
        .map_err(|e| UpstreamError::Io { path: file.to_path_buf(), source: e })?;
    Ok(Adoption {
        entry,
        link: UpstreamLink::new(
            CatalogId::Pi,
            &json!({ "filePath": file.to_string_lossy(), "version": version }),
            marker.to_json(),
        ),
    })
}

pub fn check(probe: &Probe<'_>) -> CheckOutcome {
    let Some(path) = crate::reference_path(probe.reference_json) else {
        return CheckOutcome::Inconclusive("bad pi reference".into());
    };
    jsonl::check_file(&path, probe.marker_json, probe.own_recent_user_texts, &mut PiClassifier)
}

/// What the Pi extension posts: `session_start` (and after a turn, until adopted) SessionStart; a typed
/// prompt's `message_start` UserPromptSubmit (records, drains nothing); `before_agent_start` BeforeAgent
/// (drains); `tool_result` PostToolUse; `session_shutdown` SessionEnd.
const HOOK_EVENTS: [crate::hook::HookEvent; 5] = {
    use crate::hook::HookEvent::*;
    [SessionStart, UserPromptSubmit, BeforeAgent, PostToolUse, SessionEnd]
};

/// Pi as an upstream source.
pub static SOURCE: crate::source::Source = crate::source::Source {
    id: CatalogId::Pi,
    name: "pi",
    aliases: &[],
    upstream_kind: "pi-cli",
    candidates: list_files,
    entries: |_, files, step| crate::source::entries_per_file(files, step, entry_for),
    links: crate::source::LinkOps::unbatched(adopt, adopt_file, check),
    hook: crate::source::HookSpec {
        cli: crate::hook::HookCli::Pi,
        aliases: &[],
        installed: &HOOK_EVENTS,
        accepted: &HOOK_EVENTS,
        turn_id_field: Some("turn_id"),
    },
    installer: crate::source::Installer::PiExtension,
    tested_version: "0.73",
};
