//! Gemini CLI chat recordings (`<GEMINI_CLI_HOME or ~>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`).
//!
//! Append-only JSON lines (observed with Gemini CLI 0.61.0, docs/upstream.md): a header
//! `{sessionId, projectHash, startTime, …}`; `{"$set": {...}}` merges metadata, and `$set.messages`
//! replaces the whole message list (written at every start and resume, replaying the history);
//! `{"$rewindTo": id}` drops that message and all after it; any other line with an `id` adds the message
//! with that id, or replaces it when the id was written before (a tool-calling reply is written twice).
//! A resume in a later minute than the session's creation leaves a *stray* file holding only a header
//! and the first `$set`: the session is its earliest file.
//!
//! A human turn is a `type: "user"` message row with a new id whose first part is text that the CLI did
//! not write itself (`<session_context>` is the environment, `<hook_context>` a hook's addition, a
//! `functionResponse` a tool result). The classifier remembers the conversation's last message ids in
//! the marker (bounded): they tell a rewrite from a new message, and the id a prompt follows is part
//! of its turn id, which the `BeforeAgent` hook derives too ([`turn_id_now`]).

use crate::json_stream::text_of;
use crate::jsonl::{self, RowClassifier, Verdict};
use crate::text::NormText;
use crate::time::json_ts_ms;
use crate::{Adoption, CatalogEntry, CatalogId, CheckOutcome, Homes, Probe, UpstreamError, UpstreamLink};
use serde_json::{Map, Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Message ids remembered: enough to recognise every rewrite the CLI makes (the reply it is writing).
const IDS_KEPT: usize = 64;

/// Texts the CLI writes into user messages itself.
const NOT_HUMAN_PREFIXES: &[&str] = &["<session_context>", "<hook_context>"];

/// The prompt text of a `type: "user"` message, or `None` when it is not one a human typed.
pub fn human_text(message: &Value) -> Option<NormText> {
    if message.get("type").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let content = message.get("content")?;
    let first = match content {
        Value::Array(parts) => {
            if parts.iter().any(|p| p.get("functionResponse").is_some()) {
                return None;
            }
            parts.first()?.get("text")?
        }
        other => other,
    };
    let t = text_of(first)?.norm();
    if t.is_empty() || NOT_HUMAN_PREFIXES.iter().any(|p| t.starts_with(p)) {
        return None;
    }
    Some(t)
}

/// The turn id of a prompt with text `text` that follows the message `previous`: what the file
/// monitor reads and what the `BeforeAgent` hook (which gets no message id) derives, so a prompt seen
/// by both is recorded once.
pub fn turn_id(previous: Option<&str>, text: &NormText) -> String {
    format!("{}:{:x}:{:016x}", previous.unwrap_or("-"), text.len, text.hash)
}

/// Row classifier. State: the conversation's last [`IDS_KEPT`] message ids, in order.
#[derive(Debug, Default, Clone)]
pub struct GeminiClassifier {
    ids: VecDeque<String>,
    /// The turn id of the human row just classified (read by [`RowClassifier::turn_id`]).
    last_turn: Option<String>,
}

impl GeminiClassifier {
    fn push(&mut self, id: &str) {
        self.ids.push_back(id.to_string());
        while self.ids.len() > IDS_KEPT {
            self.ids.pop_front();
        }
    }

    /// The id of the conversation's last message.
    pub fn last_id(&self) -> Option<&str> {
        self.ids.back().map(String::as_str)
    }

    fn replace_all(&mut self, messages: &[Value]) {
        self.ids.clear();
        let ids = messages.iter().filter_map(|m| m.get("id").and_then(Value::as_str));
        for id in ids {
            if !self.ids.iter().any(|k| k == id) {
                self.push(id);
            }
        }
    }
}

impl RowClassifier for GeminiClassifier {
    fn may_matter(&self, _line: &[u8]) -> bool {
        true // every message row moves the conversation's last id
    }

    fn classify(&mut self, value: Option<&Value>, truncated: bool) -> Verdict {
        self.last_turn = None;
        let Some(v) = value.and_then(Value::as_object) else {
            return Verdict::Ignore;
        };
        if let Some(set) = v.get("$set") {
            // The history replayed at a start or resume, or rewritten after a compression: never a
            // new turn, but the conversation now ends where that list ends.
            if let Some(messages) = set.get("messages").and_then(Value::as_array)
                && !truncated
            {
                self.replace_all(messages);
            }
            return Verdict::Ignore;
        }
        if let Some(id) = v.get("$rewindTo").and_then(Value::as_str) {
            if let Some(at) = self.ids.iter().position(|k| k == id) {
                self.ids.truncate(at);
            }
            return Verdict::Ignore;
        }
        let Some(id) = v.get("id").and_then(Value::as_str) else {
            return Verdict::Ignore; // the header, or a line the CLI does not read as a message
        };
        if self.ids.iter().any(|k| k == id) {
            return Verdict::Ignore; // the same message written again
        }
        let previous = self.last_id().map(str::to_string);
        self.push(id);
        let message = Value::Object(v.clone());
        match human_text(&message) {
            Some(t) if !truncated => {
                self.last_turn = Some(turn_id(previous.as_deref(), &t));
                Verdict::Human(t, json_ts_ms(v.get("timestamp")))
            }
            _ => Verdict::Ignore,
        }
    }

    fn turn_id(&self, _row: &Value) -> Option<String> {
        self.last_turn.clone()
    }

    fn load(&mut self, marker: &Map<String, Value>) {
        self.ids = marker
            .get("ids")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
    }

    fn save(&self, marker: &mut Map<String, Value>) {
        marker.insert("ids".into(), json!(self.ids));
    }
}

/// The Gemini directory: `GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn gemini_dir(homes: &Homes) -> PathBuf {
    homes
        .gemini_cli_home
        .as_deref()
        .map(|d| homes.expand(d))
        .unwrap_or_else(|| homes.home.clone())
        .join(".gemini")
}

/// Every chat file: `<gemini>/tmp/*/chats/session-*.jsonl`, sorted (per session, oldest first).
pub fn list_files(homes: &Homes) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in crate::read_dir_sorted(&gemini_dir(homes).join("tmp")) {
        for f in crate::read_dir_sorted(&project.join("chats")) {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("session-") && name.ends_with(".jsonl") && f.is_file() {
                out.push(f);
            }
        }
    }
    out
}

/// The session id in a chat file's header.
pub fn session_id(path: &Path) -> Option<String> {
    let mut id = None;
    let _ = jsonl::for_each_row(path, 1024 * 1024, &mut |row| {
        id = row.and_then(|r| r.get("sessionId")).and_then(Value::as_str).map(str::to_string);
        false
    });
    id
}

/// The session's own file: the earliest of the files whose header names it (a later one is the stray
/// file a resume leaves). Names sort by time, and only files ending in the id's first 8 characters are read.
fn session_file(files: &[PathBuf], thread_id: &str) -> Option<PathBuf> {
    let tail = format!("-{}.jsonl", thread_id.get(..8)?);
    files
        .iter()
        .filter(|f| f.to_str().is_some_and(|s| s.ends_with(&tail)))
        .min_by_key(|f| f.file_name().map(|n| n.to_os_string()))
        .filter(|f| session_id(f).as_deref() == Some(thread_id))
        .cloned()
}

/// Catalog entry for one session file.
pub fn entry_for(path: &Path) -> Option<CatalogEntry> {
    let id = session_id(path)?;
    let mut first = None;
    let mut title = None;
    let mut cls = GeminiClassifier::default();
    let _ = jsonl::for_each_row(path, 4 * 1024 * 1024, &mut |row| {
        if let Some(s) = row.and_then(|r| r.pointer("/$set/summary")).and_then(Value::as_str) {
            title = crate::title_of(s);
        }
        if first.is_none()
            && let Verdict::Human(t, _) = cls.classify(row, false)
        {
            first = crate::title_of(&t.prefix);
        }
        true
    });
    let project_dir = path.parent()?.parent()?;
    let cwd = std::fs::read_to_string(project_dir.join(".project_root")).ok().map(|s| s.trim().to_string());
    Some(CatalogEntry::of_file(CatalogId::Gemini, id, title.or(first), cwd, path))
}

pub fn adopt(homes: &Homes, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let not_found = || UpstreamError::NotFound { catalog: CatalogId::Gemini, thread: thread_id.to_string() };
    let file = session_file(&list_files(homes), thread_id).ok_or_else(not_found)?;
    let entry = entry_for(&file).ok_or_else(not_found)?;
    link_file(entry, &file)
}

/// Adopts the session a hook names. Its `transcript_path` can name the stray file of a resume, so the
/// session's own file is looked up beside it; a session whose file is not written yet is linked at
/// the start of the file named.
pub fn adopt_file(file: &Path, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let siblings = file.parent().map(crate::read_dir_sorted).unwrap_or_default();
    let own = session_file(&siblings, thread_id).unwrap_or_else(|| file.to_path_buf());
    let entry = entry_for(&own)
        .filter(|_| own.is_file())
        .unwrap_or_else(|| CatalogEntry::unwritten(CatalogId::Gemini, thread_id, &own));
    link_file(CatalogEntry { thread_id: thread_id.to_string(), ..entry }, &own)
}

fn link_file(entry: CatalogEntry, file: &Path) -> Result<Adoption, UpstreamError> {
    let marker = if file.is_file() {
        jsonl::baseline(file, &mut GeminiClassifier::default())
            .map_err(|e| UpstreamError::Io { path: file.to_path_buf(), source: e })?
    } else {
        jsonl::JsonlMarker { offset: 0, humans: Some(0), ..Default::default() }
    };
    Ok(Adoption { entry, link: UpstreamLink::to_file(CatalogId::Gemini, file, marker.to_json()) })
}

pub fn check(probe: &Probe<'_>) -> CheckOutcome {
    let Some(path) = crate::reference_path(probe.reference_json) else {
        return CheckOutcome::Inconclusive("bad gemini reference".into());
    };
    let unseen =
        jsonl::JsonlMarker::parse(probe.marker_json).is_some_and(|m| m.offset == 0 && m.head.is_none());
    if unseen && std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        // Adopted at `SessionStart` before the file was written: no evidence that it is gone.
        return CheckOutcome::Inconclusive("the chat file is not written yet".into());
    }
    jsonl::check_file(&path, probe.marker_json, probe.own_recent_user_texts, &mut GeminiClassifier::default())
}

/// The turn id a prompt with text `prompt` gets when the CLI writes it next into the link's file:
/// what `BeforeAgent` (run before the CLI writes the prompt, which waits for the hook) records, so the
/// file monitor's later reading of the same row has the same id. Reads the rows after the marker
/// (bounded like a tick), changing nothing.
pub fn turn_id_now(reference_json: &str, marker_json: &str, prompt: &str) -> Option<String> {
    let path = crate::reference_path(reference_json)?;
    let marker = jsonl::JsonlMarker::parse(marker_json)?;
    let mut cls = GeminiClassifier::default();
    cls.load(&marker.extra);
    let (mut file, meta) = jsonl::open_regular(&path).ok()?;
    let mut offset = marker.offset.min(meta.len());
    // As many windows as a few ticks read: a link far behind gets an id the monitor may not match.
    for _ in 0..8 {
        let end = jsonl::scan_window(&mut file, meta.len(), offset, jsonl::WINDOW, &|_| true, &mut |row| {
            cls.classify(row.value, row.truncated);
            true
        })
        .ok()?;
        if end == offset {
            break;
        }
        offset = end;
    }
    Some(turn_id(cls.last_id(), &NormText::of(prompt)))
}

/// Gemini's own event names: `BeforeAgent` is its prompt hook, `AfterTool` its after-tool hook,
/// `BeforeTool` (MCP tools only) names the session's MCP calls; it has no `Stop` that can block.
const HOOK_EVENTS: [crate::hook::HookEvent; 5] = {
    use crate::hook::HookEvent::*;
    [SessionStart, BeforeAgent, BeforeTool, AfterTool, SessionEnd]
};

/// One entry per Gemini session, however many files it has (a resume's stray file).
fn entries(files: &[PathBuf], step: &mut dyn FnMut()) -> Vec<CatalogEntry> {
    let mut sessions: std::collections::BTreeMap<String, CatalogEntry> = Default::default();
    for e in crate::source::entries_per_file(files, step, entry_for) {
        match sessions.get_mut(&e.thread_id) {
            Some(known) => known.updated_at_ms = known.updated_at_ms.max(e.updated_at_ms),
            None => {
                sessions.insert(e.thread_id.clone(), e);
            }
        }
    }
    sessions.into_values().collect()
}

/// Gemini CLI as an upstream source.
pub static SOURCE: crate::source::Source = crate::source::Source {
    id: CatalogId::Gemini,
    name: "gemini",
    aliases: &[],
    upstream_kind: "gemini-cli",
    candidates: list_files,
    entries: |_, files, step| entries(files, step),
    links: crate::source::LinkOps::unbatched(adopt, adopt_file, check),
    hook: crate::source::HookSpec {
        cli: crate::hook::HookCli::Gemini,
        aliases: &["gemini-cli"],
        installed: &HOOK_EVENTS,
        accepted: &HOOK_EVENTS,
        // Its hooks give no turn id: the gateway derives it from the session's file (`turn_id_now`).
        turn_id_field: None,
    },
    installer: crate::source::Installer::Settings(crate::source::SettingsHooks {
        user_env: "GEMINI_CLI_HOME",
        under_env: ".gemini/settings.json",
        under_home: ".gemini/settings.json",
        project: ".gemini/settings.json",
        comments: true,
        named_handlers_ms: true,
        trust: false,
    }),
    tested_version: "0.61",
};

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[Value]) -> Vec<(String, Option<String>)> {
        let mut cls = GeminiClassifier::default();
        let mut out = vec![];
        for r in rows {
            // Through the marker after every row, as ticks do.
            let mut m = Map::new();
            cls.save(&mut m);
            cls = GeminiClassifier::default();
            cls.load(&m);
            if let Verdict::Human(t, _) = cls.classify(Some(r), false) {
                out.push((t.prefix, cls.turn_id(r)));
            }
        }
        out
    }

    fn user(id: &str, text: &str) -> Value {
        json!({"id": id, "timestamp": "2026-12-06T01:10:41.861Z", "type": "user", "content": [{"text": text}]})
    }

    #[test]
    fn only_new_typed_user_messages_are_human() {
        let rows = [
            json!({"sessionId": "s", "projectHash": "h", "startTime": "t", "kind": "main"}),
            json!({"$set": {"messages": [user("ctx", "<session_context>\nThis is the Gemini CLI.")]}}),
            user("a", "first prompt"),
            json!({"id": "b", "type": "gemini", "content": "reply"}),
            json!({"id": "b", "type": "gemini", "content": "", "toolCalls": []}),
            json!({"id": "c", "type": "user", "content": [{"functionResponse": {"name": "x", "response": {}}}]}),
            user("d", "<hook_context>notice</hook_context>"),
            user("a", "first prompt"),
            json!({"$set": {"messages": [user("ctx", "<session_context>"), user("a", "first prompt"), user("z", "never recorded as a row")]}}),
            user("e", "second prompt"),
        ];
        let found = run(&rows);
        assert_eq!(
            found,
            vec![
                ("first prompt".to_string(), Some(turn_id(Some("ctx"), &NormText::of("first prompt")))),
                ("second prompt".to_string(), Some(turn_id(Some("z"), &NormText::of("second prompt")))),
            ]
        );
    }

    #[test]
    fn a_rewind_moves_the_turn_a_prompt_follows() {
        let rows = [
            user("a", "one"),
            json!({"id": "b", "type": "gemini", "content": "reply"}),
            user("c", "two"),
            json!({"$rewindTo": "c"}),
            user("d", "two, edited"),
        ];
        let found = run(&rows);
        assert_eq!(found.len(), 3);
        assert_eq!(found[2].1, Some(turn_id(Some("b"), &NormText::of("two, edited"))));
    }

    #[test]
    fn the_remembered_ids_are_bounded() {
        let mut cls = GeminiClassifier::default();
        for i in 0..1000 {
            cls.classify(Some(&user(&format!("id-{i}"), "x")), false);
        }
        let mut m = Map::new();
        cls.save(&mut m);
        assert_eq!(m["ids"].as_array().unwrap().len(), IDS_KEPT);
    }
}
