//! OpenCode sessions in SQLite (`<data>/opencode/opencode.db`), read-only.
//!
//! OpenCode 1.18 writes every part of a message with its type and `synthetic`/`ignored` flags,
//! compaction parts with `auto`, and the assistant's compaction summary with `summary: true`. From
//! that evidence ([`user_turn`]) a human turn is a typed text, an attachment-only message (`@file`,
//! image), a slash command routed to a sub-agent (`subtask` part), a manual `/compact`, or a `!shell`
//! escape; synthetic and ignored parts, automatic compactions, the continuation after one and a
//! prompt replayed after a compaction are not. If the v2 `session_message` table has rows for a
//! session, its `type` column is used instead.

use crate::text::{NormText, OwnTexts};
use crate::{
    Adoption, CatalogEntry, CatalogId, CheckOutcome, CountedTurns, Homes, Probe, UpstreamError, UpstreamLink,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const REPLAY_WINDOW: usize = 50;
const SHELL_MARKER: &str = "The following tool was executed by the user";

/// Open the database read-only (no writes, no locks that block a WAL writer).
pub fn open_ro(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_millis(2000))?;
    Ok(conn)
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row("SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?1", [name], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n > 0)
}

/// One v1 message with its parts.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub created: i64,
    pub data: Value,
    pub parts: Vec<Value>,
}

impl Message {
    fn role(&self) -> Option<&str> {
        self.data.get("role").and_then(Value::as_str)
    }
}

fn part_type(p: &Value) -> Option<&str> {
    p.get("type").and_then(Value::as_str)
}

fn is_true(p: &Value, k: &str) -> bool {
    p.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn compaction_continue(p: &Value) -> bool {
    p.pointer("/metadata/compaction_continue").and_then(Value::as_bool).unwrap_or(false)
}

/// Remove `[start, end)` (UTF-16 code units, as OpenCode's JavaScript writes them) if the slice
/// equals `value`; otherwise remove the first occurrence of `value`.
fn remove_span(text: &str, start: usize, end: usize, value: &str) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    if start <= end && end <= units.len() {
        let slice = String::from_utf16_lossy(&units[start..end]);
        if slice == value {
            let mut out = String::from_utf16_lossy(&units[..start]);
            out.push_str(&String::from_utf16_lossy(&units[end..]));
            return out;
        }
    }
    if !value.is_empty()
        && let Some(i) = text.find(value)
    {
        let mut out = text[..i].to_string();
        out.push_str(&text[i + value.len()..]);
        return out;
    }
    text.to_string()
}

/// What one v1 user message is. Decided from all of its parts (see [`classify_messages`] for when a
/// message counts as completely written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserTurn {
    /// A human's: typed text, an `@file` or image attachment, a slash command (also one routed to a
    /// sub-agent), a manual `/compact`, or a `!shell` escape. The text is what self-echo and replay
    /// checks compare.
    Human(NormText),
    /// OpenCode's or an agent's: synthetic or ignored parts only, an automatic compaction, the
    /// continuation after one.
    NotHuman,
}

/// Classifies one user message by its parts.
pub fn user_turn(m: &Message) -> UserTurn {
    match human_text(m) {
        Some(text) => UserTurn::Human(NormText::of(&text)),
        None => UserTurn::NotHuman,
    }
}

/// The text of a human's user message as self-echo and replay checks compare it (see [`user_turn`]),
/// `None` for OpenCode's or an agent's. A message with a typed text part and a synthetic one (the
/// sessionwatch plugin's notice) is a human's: the synthetic part is not part of the text.
pub fn human_text(m: &Message) -> Option<String> {
    if m.role() != Some("user") || m.parts.iter().any(compaction_continue) {
        return None;
    }
    if let Some(c) = m.parts.iter().find(|p| part_type(p) == Some("compaction")) {
        // A manual `/compact` is the human's; OpenCode compacts on its own with `auto: true`.
        let manual = c.get("auto").and_then(Value::as_bool) == Some(false);
        return manual.then(|| "/compact".to_string());
    }
    if let Some(task) = m.parts.iter().find(|p| part_type(p) == Some("subtask")) {
        // A slash command routed to a sub-agent: the human typed `/command args`.
        let field = |k: &str| task.get(k).and_then(Value::as_str).unwrap_or("");
        let name = if field("command").is_empty() { field("agent") } else { field("command") };
        let prompt = if field("prompt").is_empty() { field("description") } else { field("prompt") };
        return Some(format!("/{name} {prompt}"));
    }
    let own_parts = |ty: &'static str| {
        m.parts
            .iter()
            .filter(move |p| part_type(p) == Some(ty))
            .filter(|p| !is_true(p, "synthetic") && !is_true(p, "ignored"))
    };
    let mut texts: Vec<String> =
        own_parts("text").filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string)).collect();
    if !texts.is_empty() {
        // @file / @agent mention spans, applied from the end.
        let mut spans: Vec<(usize, usize, String)> = m
            .parts
            .iter()
            .filter(|p| matches!(part_type(p), Some("file" | "agent")))
            .filter_map(|p| {
                let t = p.pointer("/source/text")?;
                Some((
                    t.get("start")?.as_u64()? as usize,
                    t.get("end")?.as_u64()? as usize,
                    t.get("value")?.as_str()?.to_string(),
                ))
            })
            .collect();
        spans.sort_by_key(|s| std::cmp::Reverse(s.0));
        for (s, e, v) in spans {
            texts[0] = remove_span(&texts[0], s, e, &v);
        }
        let text = texts.join("\n");
        let t = NormText::of(&text);
        let shell_marker = t.complete && t.prefix == SHELL_MARKER;
        if !(t.is_empty() || shell_marker) {
            return Some(text);
        }
    }
    // Only attachments: an `@file` mention accepted from the completion list, a pasted image.
    let files: Vec<&str> =
        own_parts("file").map(|p| p.get("filename").and_then(Value::as_str).unwrap_or("file")).collect();
    if !files.is_empty() {
        return Some(format!("[attached: {}]", files.join(", ")));
    }
    // A `!shell` escape: OpenCode records the user's command as this marker and a bash tool call.
    let shell = m.parts.iter().any(|p| {
        part_type(p) == Some("text")
            && p.get("text").and_then(Value::as_str).is_some_and(|t| t.trim_start().starts_with(SHELL_MARKER))
    });
    shell.then(|| "!shell".to_string())
}

/// The human text of a v1 message, if it is a human's (see [`user_turn`]).
pub fn direct_human_text(m: &Message) -> Option<NormText> {
    match user_turn(m) {
        UserTurn::Human(t) => Some(t),
        UserTurn::NotHuman => None,
    }
}

/// Texts a replay of this (earlier) user message could carry.
fn replay_texts(m: &Message) -> Vec<NormText> {
    let mut out = Vec::new();
    if let Some(t) = direct_human_text(m) {
        out.push(t);
    }
    let mut raw = Vec::new();
    for p in &m.parts {
        match part_type(p) {
            Some("text") if !compaction_continue(p) => {
                if let Some(s) = p.get("text").and_then(Value::as_str) {
                    raw.push(s.to_string());
                }
            }
            Some("file") => {
                let mime = p.get("mime").and_then(Value::as_str).unwrap_or("");
                if mime.starts_with("image/") || mime == "application/pdf" {
                    let name = p.get("filename").and_then(Value::as_str).unwrap_or("file");
                    raw.push(format!("[Attached {mime}: {name}]"));
                }
            }
            _ => {}
        }
    }
    let t = NormText::of(&raw.join("\n"));
    if !t.is_empty() {
        out.push(t);
    }
    out
}

/// The OpenCode marker, read typed on every tick of every link (no JSON tree).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    pub seq: i64,
    pub last_human_message_id: Option<String>,
    /// v2 `session_message.seq` cursor, if the session uses v2 tables.
    pub v2_seq: Option<i64>,
}

impl Marker {
    pub fn parse(s: &str) -> Option<Marker> {
        serde_json::from_str(s).ok()
    }
    pub fn to_json(&self) -> String {
        let mut v = json!({ "seq": self.seq, "lastHumanMessageId": self.last_human_message_id });
        if let Some(s) = self.v2_seq {
            v["v2Seq"] = json!(s);
        }
        v.to_string()
    }
}

/// Outcome of classifying a v1 message list against a marker.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Classified {
    /// The newest message is a user message not known to be complete: read the session again.
    pub pending: bool,
    pub last_human_message_id: Option<String>,
    /// The human turns counted; their turn ids are message ids.
    pub counted: CountedTurns,
}

/// A compaction: a user message with a `compaction` part, or the assistant summary it produces.
fn is_compaction(m: &Message) -> bool {
    m.parts.iter().any(|p| part_type(p) == Some("compaction"))
        || (m.role() == Some("assistant") && m.data.get("summary").and_then(Value::as_bool) == Some(true))
}

/// Classify messages (sorted by (created, id)) newer than `last_human`.
///
/// A user message is classified once all its parts are written, which OpenCode guarantees when any
/// later message exists (it writes the user message and all its parts before the reply starts); the
/// newest message, if it is a user message, waits for the next tick, so the answer never depends on
/// when a tick lands. A text equal to one of the previous 50 user messages is a replay only when a
/// compaction happened since that message (OpenCode re-sends the prompt after compacting); a human
/// repeating words is counted.
pub fn classify_messages(msgs: &[Message], last_human: Option<&str>, own: &OwnTexts) -> Classified {
    let mut out =
        Classified { last_human_message_id: last_human.map(str::to_string), ..Classified::default() };
    // Earlier user messages' texts, with the number of compactions seen before each.
    let mut previous: Vec<(usize, Vec<NormText>)> = Vec::new();
    let mut compactions = 0usize;
    for (i, m) in msgs.iter().enumerate() {
        if is_compaction(m) && m.role() == Some("assistant") {
            compactions += 1;
        }
        if m.role() != Some("user") {
            continue;
        }
        if i + 1 == msgs.len() {
            out.pending = last_human.is_none_or(|l| m.id.as_str() > l);
            break; // not known to be complete yet
        }
        let newer = last_human.is_none_or(|l| m.id.as_str() > l);
        if newer && m.created > 0 {
            if out.last_human_message_id.as_deref().is_none_or(|l| m.id.as_str() > l) {
                out.last_human_message_id = Some(m.id.clone());
            }
            if let UserTurn::Human(t) = user_turn(m) {
                let start = previous.len().saturating_sub(REPLAY_WINDOW);
                let replay = previous[start..].iter().any(|(seen, texts)| {
                    *seen < compactions && texts.iter().any(|p| p.len == t.len && p.hash == t.hash)
                });
                if !replay && own.is_external(&t) {
                    out.counted.add(Some(m.created), Some(m.id.clone()));
                }
            }
        }
        if is_compaction(m) {
            compactions += 1;
        }
        previous.push((compactions, replay_texts(m)));
    }
    out
}

/// The newest user message's id: an adoption's baseline (everything before it was seen, complete or not).
pub fn last_user_message_id(msgs: &[Message]) -> Option<String> {
    msgs.iter().filter(|m| m.role() == Some("user")).map(|m| m.id.clone()).max()
}

/// Load all messages of a session with their parts, sorted by (created, id).
pub fn load_messages(conn: &Connection, session: &str) -> rusqlite::Result<Vec<Message>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
    )?;
    let mut msgs: Vec<Message> = stmt
        .query_map([session], |r| {
            let data: String = r.get(2)?;
            Ok(Message {
                id: r.get(0)?,
                created: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                data: serde_json::from_str(&data).unwrap_or(Value::Null),
                parts: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let idx: HashMap<String, usize> = msgs.iter().enumerate().map(|(i, m)| (m.id.clone(), i)).collect();
    let mut pstmt = conn
        .prepare_cached("SELECT message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id")?;
    let rows = pstmt.query_map([session], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (mid, data) = row?;
        if let Some(&i) = idx.get(&mid)
            && msgs[i].role() == Some("user")
        {
            // Only user messages are classified; assistant parts are never needed.
            msgs[i].parts.push(serde_json::from_str(&data).unwrap_or(Value::Null));
        }
    }
    Ok(msgs)
}

struct V2Tally {
    max_seq: Option<i64>,
    last_user: Option<String>,
    counted: CountedTurns,
}

fn v2_rows(
    conn: &Connection,
    session: &str,
    after: i64,
    own: &OwnTexts,
) -> rusqlite::Result<Option<V2Tally>> {
    if !has_table(conn, "session_message")? {
        return Ok(None);
    }
    let any: Option<i64> = conn
        .query_row("SELECT max(seq) FROM session_message WHERE session_id = ?1", [session], |r| r.get(0))
        .optional()?
        .flatten();
    if any.is_none() {
        return Ok(None);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT id, type, seq, time_created, data FROM session_message \
         WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    let mut t = V2Tally { max_seq: any, last_user: None, counted: CountedTurns::default() };
    let rows = stmt.query_map(params![session, after], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, Option<i64>>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    for row in rows {
        let (id, ty, _seq, created, data) = row?;
        if ty != "user" {
            continue;
        }
        let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        let text = NormText::of(data.get("text").and_then(Value::as_str).unwrap_or(""));
        t.last_user = Some(id.clone());
        if !text.is_empty() && own.is_external(&text) {
            t.counted.add(created, Some(id));
        }
    }
    Ok(Some(t))
}

/// Database path from a reference.
pub fn reference_db(reference_json: &str) -> Option<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Reference {
        #[serde(rename = "dbPath")]
        db_path: PathBuf,
    }
    serde_json::from_str::<Reference>(reference_json).ok().map(|r| r.db_path)
}

fn reference_thread(reference_json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Reference {
        #[serde(rename = "threadId")]
        thread_id: String,
    }
    let thread = serde_json::from_str::<Reference>(reference_json).ok()?.thread_id;
    (!thread.is_empty()).then_some(thread)
}

/// Latest event sequence per session (missing row = 0; no `event_sequence` table: the
/// session's `time_updated`). Sessions absent from the result are gone.
fn indicators(conn: &Connection, ids: &[String]) -> rusqlite::Result<HashMap<String, i64>> {
    let with_seq = has_table(conn, "event_sequence")?;
    let mut out = HashMap::new();
    for chunk in ids.chunks(400) {
        let qs = vec!["?"; chunk.len()].join(",");
        let sql = if with_seq {
            format!(
                "SELECT s.id, COALESCE(e.seq, 0) FROM session s \
                 LEFT JOIN event_sequence e ON e.aggregate_id = s.id WHERE s.id IN ({qs})"
            )
        } else {
            format!("SELECT id, time_updated FROM session WHERE id IN ({qs})")
        };
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(chunk.iter()), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0)))
        })?;
        for row in rows {
            let (id, seq) = row?;
            out.insert(id, seq);
        }
    }
    Ok(out)
}

/// One tick for many links on one database.
pub fn check_batch(db_path: &Path, probes: &[Probe<'_>]) -> Vec<CheckOutcome> {
    match std::fs::metadata(db_path) {
        Err(e) => {
            let o = crate::io_outcome(&e, db_path);
            return probes.iter().map(|_| o.clone()).collect();
        }
        Ok(m) if !m.is_file() => return probes.iter().map(|_| CheckOutcome::Missing).collect(),
        Ok(_) => {}
    }
    let conn = match open_ro(db_path) {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("open {}: {e}", db_path.display());
            return probes.iter().map(|_| CheckOutcome::Inconclusive(msg.clone())).collect();
        }
    };
    let parsed: Vec<Option<(String, Marker)>> = probes
        .iter()
        .map(|p| Some((reference_thread(p.reference_json)?, Marker::parse(p.marker_json)?)))
        .collect();
    let ids: Vec<String> = parsed.iter().flatten().map(|(t, _)| t.clone()).collect();
    let seqs = match indicators(&conn, &ids) {
        Ok(s) => s,
        Err(e) => {
            // A failed batch is not evidence of anything.
            let msg = format!("indicator query: {e}");
            return probes.iter().map(|_| CheckOutcome::Inconclusive(msg.clone())).collect();
        }
    };
    parsed
        .iter()
        .zip(probes)
        .map(|(p, probe)| {
            let Some((thread, marker)) = p else {
                return CheckOutcome::Inconclusive("bad opencode reference or marker".into());
            };
            let Some(&seq) = seqs.get(thread) else {
                return CheckOutcome::Missing;
            };
            if seq == marker.seq {
                return CheckOutcome::NoChange;
            }
            if seq < marker.seq {
                // A migration reset the sequence: re-baseline, report nothing.
                let next = Marker { seq, ..marker.clone() };
                return CheckOutcome::rebaselined(next.to_json(), format!("reseq:{seq}"));
            }
            let own = OwnTexts::new(probe.own_recent_user_texts);
            match read_session(&conn, thread, marker, seq, &own) {
                Ok(o) => o,
                Err(e) => CheckOutcome::Inconclusive(format!("reading {thread}: {e}")),
            }
        })
        .collect()
}

fn read_session(
    conn: &Connection,
    thread: &str,
    marker: &Marker,
    seq: i64,
    own: &OwnTexts,
) -> rusqlite::Result<CheckOutcome> {
    conn.execute_batch("BEGIN")?;
    let res = (|| {
        if let Some(v2) = v2_rows(conn, thread, marker.v2_seq.unwrap_or(0), own)? {
            let next = Marker {
                seq,
                last_human_message_id: v2.last_user.or(marker.last_human_message_id.clone()),
                v2_seq: v2.max_seq.or(marker.v2_seq),
            };
            return Ok(CheckOutcome::Activity {
                human_turns: v2.counted.turns,
                occurred_at_ms: v2.counted.max_ts,
                dedupe_id: v2.counted.last_turn.unwrap_or_else(|| format!("seq:{seq}")),
                next_marker_json: next.to_json(),
                turn_id: None,
            });
        }
        let msgs = load_messages(conn, thread)?;
        let c = classify_messages(&msgs, marker.last_human_message_id.as_deref(), own);
        // A user message still being written keeps the old sequence, so the next tick reads again.
        let seq = if c.pending { marker.seq } else { seq };
        let next = Marker { seq, last_human_message_id: c.last_human_message_id, v2_seq: marker.v2_seq };
        Ok(CheckOutcome::Activity {
            human_turns: c.counted.turns,
            occurred_at_ms: c.counted.max_ts,
            // The message id is the turn id the plugin reports for the same prompt (one event for both).
            turn_id: c.counted.last_turn.clone(),
            dedupe_id: c.counted.last_turn.unwrap_or_else(|| format!("seq:{seq}")),
            next_marker_json: next.to_json(),
        })
    })();
    let _ = conn.execute_batch("COMMIT");
    res
}

/// The session columns a catalog entry is read from ([`entry_of_row`]).
const ENTRY_COLUMNS: &str = "SELECT id, title, directory, time_updated FROM session";

/// The catalog entry of a row of [`ENTRY_COLUMNS`] in the database `db`.
fn entry_of_row(r: &rusqlite::Row<'_>, db: &Path) -> rusqlite::Result<CatalogEntry> {
    Ok(CatalogEntry {
        catalog_id: CatalogId::OpenCode,
        thread_id: r.get(0)?,
        title: r.get::<_, Option<String>>(1)?.and_then(|t| crate::title_of(&t)),
        cwd: r.get(2)?,
        updated_at_ms: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
        location: db.to_string_lossy().into_owned(),
    })
}

/// Catalog entries (top-level sessions only; child sessions carry agent-written prompts).
pub fn list_sessions(db: &Path) -> Result<Vec<CatalogEntry>, UpstreamError> {
    let err = |e: rusqlite::Error| UpstreamError::Sqlite { path: db.to_path_buf(), message: e.to_string() };
    let conn = open_ro(db).map_err(err)?;
    let mut stmt = conn
        .prepare(&format!("{ENTRY_COLUMNS} WHERE parent_id IS NULL ORDER BY time_updated DESC"))
        .map_err(err)?;
    let rows = stmt.query_map([], |r| entry_of_row(r, db)).map_err(err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err)
}

pub fn adopt(homes: &Homes, thread_id: &str) -> Result<Adoption, UpstreamError> {
    adopt_db(&homes.opencode_db_path(), thread_id)
}

/// Adopts a session of the OpenCode database `db` (the one the sessionwatch plugin names: the
/// OpenCode process's own, which may differ from the gateway's default).
pub fn adopt_db(db: &Path, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let db = db.to_path_buf();
    let not_found =
        || UpstreamError::NotFound { catalog: CatalogId::OpenCode, thread: thread_id.to_string() };
    if !db.is_file() {
        return Err(not_found());
    }
    let err = |e: rusqlite::Error| UpstreamError::Sqlite { path: db.clone(), message: e.to_string() };
    let conn = open_ro(&db).map_err(err)?;
    let seqs = indicators(&conn, &[thread_id.to_string()]).map_err(err)?;
    let seq = *seqs.get(thread_id).ok_or_else(not_found)?;
    let entry: CatalogEntry = conn
        .query_row(&format!("{ENTRY_COLUMNS} WHERE id = ?1"), [thread_id], |r| entry_of_row(r, &db))
        .map_err(err)?;
    let own = OwnTexts::default();
    let marker = match v2_rows(&conn, thread_id, 0, &own).map_err(err)? {
        Some(v2) => Marker { seq, last_human_message_id: v2.last_user, v2_seq: v2.max_seq },
        None => {
            let msgs = load_messages(&conn, thread_id).map_err(err)?;
            Marker { seq, last_human_message_id: last_user_message_id(&msgs), v2_seq: None }
        }
    };
    Ok(Adoption {
        entry,
        link: UpstreamLink::new(
            CatalogId::OpenCode,
            &json!({ "dbPath": db.to_string_lossy(), "threadId": thread_id }),
            marker.to_json(),
        ),
    })
}

/// One tick for one link: a batch of one.
fn check_one(probe: &Probe<'_>) -> CheckOutcome {
    let Some(db) = reference_db(probe.reference_json) else {
        return CheckOutcome::Inconclusive("bad opencode reference".into());
    };
    check_batch(&db, std::slice::from_ref(probe))
        .pop()
        .unwrap_or_else(|| CheckOutcome::Inconclusive("no outcome".into()))
}

/// Links sharing a database are checked in one batched query; a panic costs only that database's links.
fn check_many(jobs: &[Probe<'_>]) -> Vec<CheckOutcome> {
    let no_outcome = || CheckOutcome::Inconclusive("no outcome".into());
    let mut out: Vec<Option<CheckOutcome>> = vec![None; jobs.len()];
    let mut by_db: std::collections::BTreeMap<PathBuf, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, probe) in jobs.iter().enumerate() {
        match reference_db(probe.reference_json) {
            Some(db) => by_db.entry(db).or_default().push(i),
            None => out[i] = Some(CheckOutcome::Inconclusive("bad opencode reference".into())),
        }
    }
    for (db, idx) in by_db {
        let probes: Vec<Probe<'_>> = idx.iter().map(|&i| jobs[i]).collect();
        let outcomes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_batch(&db, &probes)))
            .unwrap_or_default();
        for (n, &i) in idx.iter().enumerate() {
            out[i] = Some(outcomes.get(n).cloned().unwrap_or_else(no_outcome));
        }
    }
    out.into_iter().map(|o| o.unwrap_or_else(no_outcome)).collect()
}

/// The plugin's `chat.message` and `tool.execute.after` handlers.
const HOOK_EVENTS: [crate::hook::HookEvent; 2] =
    [crate::hook::HookEvent::UserPromptSubmit, crate::hook::HookEvent::PostToolUse];

/// OpenCode as an upstream source.
pub static SOURCE: crate::source::Source = crate::source::Source {
    id: CatalogId::OpenCode,
    name: "opencode",
    aliases: &[],
    upstream_kind: "opencode-cli",
    // The one database, when it exists.
    candidates: |homes| Some(homes.opencode_db_path()).filter(|db| db.is_file()).into_iter().collect(),
    entries: |_, dbs, step| {
        let mut out = Vec::new();
        for db in dbs {
            match list_sessions(db) {
                Ok(v) => out.extend(v),
                Err(e) => tracing::warn!(error = %e, "opencode catalog unreadable"),
            }
            step();
        }
        out
    },
    links: crate::source::LinkOps {
        adopt,
        adopt_transcript: adopt_db,
        check: check_one,
        check_many: Some(check_many),
    },
    hook: crate::source::HookSpec {
        cli: crate::hook::HookCli::OpenCode,
        aliases: &[],
        installed: &HOOK_EVENTS,
        accepted: &HOOK_EVENTS,
        turn_id_field: Some("prompt_id"),
    },
    installer: crate::source::Installer::OpenCodePlugin,
    tested_version: "1.18",
};
