//! Codex rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`).
//!
//! A human prompt appears twice in a rollout: the model-facing `response_item` message (which
//! also carries injected context) and a UI event: `event_msg` `user_message` (older builds) or
//! `event_msg` `item_completed` with `item.type == "UserMessage"` (0.171+). Only the UI events
//! count; if one build writes both event kinds for the same prompt in the same turn, it counts
//! once.

use crate::json_stream::text_of;
use crate::jsonl::{self, RowClassifier, Verdict};
use crate::text::NormText;
use crate::time::{json_ts_ms, parse_rfc3339_ms};
use crate::{Adoption, CatalogEntry, CatalogId, CheckOutcome, Homes, Probe, UpstreamError, UpstreamLink};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Contextual fragments Codex injects as "user" text; never a human turn.
const CONTEXTUAL_PREFIXES: &[&str] = &[
    "<environment_context>",
    "# AGENTS.md instructions for",
    "<user_instructions>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<external_",
    "<permissions instructions>",
];

fn contextual(t: &NormText) -> bool {
    CONTEXTUAL_PREFIXES.iter().any(|p| t.starts_with(p))
}

/// Kind of event that carried a human prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    UserMessage,
    ItemCompleted,
}

/// Classifier with turn tracking; state is kept in the marker.
#[derive(Debug, Default)]
pub struct CodexClassifier {
    turn_id: Option<String>,
    /// User messages seen in `turn_id`.
    turn_count: u64,
    /// Prompts counted in the current turn, by kind (for dual-record dedupe).
    recent: Vec<(Kind, u64, u64)>,
    /// The text of the human row classified last (its turn key names it; not kept in the marker).
    last_human: Option<NormText>,
}

/// The id a Codex human message is recorded under, by its hook (`turn_id` and `prompt`) and by the
/// file monitor (the turn's id and the row's text) alike. A steer (text typed while the agent works)
/// joins the running turn and carries its id: the text tells it from the turn's prompt, so each is
/// recorded once whichever tick reads it. The same text sent twice into one turn is one message.
pub fn human_turn_key(turn_id: &str, text: &NormText) -> String {
    format!("{turn_id}:{:x}-{:x}", text.len, text.hash)
}

/// What one Codex row is.
#[derive(Debug)]
pub enum CodexRow {
    TurnStarted(String),
    Human(NormText, Option<i64>, bool /* item_completed */),
    Other,
}

pub fn classify_row(row: &Value) -> CodexRow {
    let ty = row.get("type").and_then(Value::as_str);
    let Some(p) = row.get("payload") else {
        return CodexRow::Other;
    };
    let pty = p.get("type").and_then(Value::as_str);
    let line_ts = row.get("timestamp").and_then(Value::as_str).and_then(parse_rfc3339_ms);
    match (ty, pty) {
        (Some("event_msg"), Some("task_started" | "turn_started")) => {
            match p.get("turn_id").and_then(Value::as_str) {
                Some(t) => CodexRow::TurnStarted(t.to_string()),
                None => CodexRow::Other,
            }
        }
        (Some("turn_context"), _) => match p.get("turn_id").and_then(Value::as_str) {
            Some(t) => CodexRow::TurnStarted(t.to_string()),
            None => CodexRow::Other,
        },
        (Some("event_msg"), Some("user_message")) => {
            if let Some(k) = p.get("kind").and_then(Value::as_str)
                && k != "plain"
            {
                return CodexRow::Other;
            }
            let Some(t) = p.get("message").and_then(text_of) else {
                return CodexRow::Other;
            };
            let t = t.norm();
            if contextual(&t) {
                return CodexRow::Other;
            }
            CodexRow::Human(t, line_ts, false)
        }
        (Some("event_msg"), Some("item_completed")) => {
            let Some(item) = p.get("item") else {
                return CodexRow::Other;
            };
            let ts = json_ts_ms(p.get("completed_at_ms")).or(line_ts);
            match item.get("type").and_then(Value::as_str) {
                Some("UserMessage") => {}
                // The human ran `!cmd` in the TUI: a turn of its own, a human turn as in the other sources.
                Some("CommandExecution")
                    if item.get("source").and_then(Value::as_str) == Some("user_shell") =>
                {
                    let command = item
                        .get("command")
                        .and_then(Value::as_array)
                        .and_then(|c| c.last())
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    return CodexRow::Human(NormText::of(&format!("!{command}")), ts, true);
                }
                _ => return CodexRow::Other,
            }
            let mut parts = Vec::new();
            if let Some(content) = item.get("content").and_then(Value::as_array) {
                for c in content {
                    if c.get("type").and_then(Value::as_str) == Some("text")
                        && let Some(t) = c.get("text").and_then(text_of)
                    {
                        parts.push(t.norm());
                    }
                }
            } else if let Some(t) = item.get("text").and_then(text_of) {
                parts.push(t.norm());
            }
            let t = NormText::join(parts.iter());
            if contextual(&t) {
                return CodexRow::Other;
            }
            CodexRow::Human(t, ts, true)
        }
        _ => CodexRow::Other,
    }
}

impl RowClassifier for CodexClassifier {
    fn may_matter(&self, line: &[u8]) -> bool {
        use memchr::memmem::find;
        find(line, b"user_message").is_some()
            || find(line, b"UserMessage").is_some()
            || find(line, b"turn_id").is_some()
            || find(line, b"\\u").is_some()
    }

    fn classify(&mut self, value: Option<&Value>, truncated: bool) -> Verdict {
        let Some(v) = value else {
            return Verdict::Ignore;
        };
        match classify_row(v) {
            CodexRow::TurnStarted(t) => {
                if self.turn_id.as_deref() != Some(t.as_str()) {
                    self.turn_id = Some(t);
                    self.turn_count = 0;
                    self.recent.clear();
                }
                Verdict::Ignore
            }
            CodexRow::Human(t, ts, item) => {
                if truncated {
                    return Verdict::Ignore;
                }
                let kind = if item { Kind::ItemCompleted } else { Kind::UserMessage };
                // The same prompt recorded by the other event kind in this turn: count once.
                if let Some(i) =
                    self.recent.iter().position(|(k, l, h)| *k != kind && *l == t.len && *h == t.hash)
                {
                    self.recent.remove(i);
                    return Verdict::Ignore;
                }
                self.recent.push((kind, t.len, t.hash));
                if self.recent.len() > 16 {
                    self.recent.remove(0);
                }
                self.turn_count += 1;
                self.last_human = Some(t.clone());
                Verdict::Human(t, ts)
            }
            CodexRow::Other => Verdict::Ignore,
        }
    }

    fn load(&mut self, m: &Map<String, Value>) {
        self.turn_id = m.get("turnId").and_then(Value::as_str).map(str::to_string);
        self.turn_count = m.get("userMessageCount").and_then(Value::as_u64).unwrap_or(0);
        self.recent = m
            .get("recent")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        let e = e.as_array()?;
                        let kind = match e.first()?.as_str()? {
                            "um" => Kind::UserMessage,
                            _ => Kind::ItemCompleted,
                        };
                        Some((kind, e.get(1)?.as_u64()?, e.get(2)?.as_u64()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
    }

    fn save(&self, m: &mut Map<String, Value>) {
        if let Some(t) = &self.turn_id {
            m.insert("turnId".into(), json!(t));
        }
        m.insert("userMessageCount".into(), json!(self.turn_count));
        if !self.recent.is_empty() {
            let r: Vec<Value> = self
                .recent
                .iter()
                .map(|(k, l, h)| {
                    json!([
                        match k {
                            Kind::UserMessage => "um",
                            Kind::ItemCompleted => "ic",
                        },
                        l,
                        h
                    ])
                })
                .collect();
            m.insert("recent".into(), Value::Array(r));
        }
    }

    /// The current turn's id, which Codex also hands its hooks as `turn_id`, with the row's text.
    fn turn_id(&self, _row: &Value) -> Option<String> {
        Some(human_turn_key(self.turn_id.as_deref()?, self.last_human.as_ref()?))
    }

    fn dedupe_id(&self, offset: u64, humans: u64) -> String {
        match &self.turn_id {
            Some(t) => format!("{t}:{}:{offset}", self.turn_count),
            None => format!("{offset}:{humans}"),
        }
    }
}

/// Thread id from a rollout file name (`rollout-<time>-<uuid>.jsonl[.zst]`).
pub fn thread_id_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl.zst").or_else(|| name.strip_suffix(".jsonl"))?;
    if !stem.starts_with("rollout-") || stem.len() < 36 {
        return None;
    }
    let id = &stem[stem.len() - 36..];
    if id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && id.matches('-').count() == 4 {
        Some(id.to_string())
    } else {
        None
    }
}

fn walk_rollouts(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    for p in crate::read_dir_sorted(dir) {
        if p.is_dir() {
            if depth < 4 {
                walk_rollouts(&p, depth + 1, out);
            }
        } else if thread_id_of(&p).is_some() && p.is_file() {
            out.push(p);
        }
    }
}

/// Live and archived rollouts (plain and compressed).
pub fn list_files(homes: &Homes) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let home = homes.codex_dir();
    walk_rollouts(&home.join("sessions"), 0, &mut out);
    walk_rollouts(&home.join("archived_sessions"), 3, &mut out);
    // Prefer the plain file when both forms exist.
    let plain: std::collections::HashSet<PathBuf> =
        out.iter().filter(|p| p.extension().is_some_and(|e| e == "jsonl")).cloned().collect();
    out.retain(|p| p.extension().is_none_or(|e| e != "zst") || !plain.contains(&p.with_extension("")));
    out
}

/// Thread names from `session_index.jsonl` (latest line wins).
pub fn thread_names(homes: &Homes) -> HashMap<String, String> {
    let mut names = HashMap::new();
    let path = homes.codex_dir().join("session_index.jsonl");
    let _ = jsonl::for_each_row(&path, 16 * 1024 * 1024, &mut |row| {
        if let Some(r) = row
            && let (Some(id), Some(n)) =
                (r.get("id").and_then(Value::as_str), r.get("thread_name").and_then(Value::as_str))
        {
            names.insert(id.to_string(), n.to_string());
        }
        true
    });
    names
}

/// Catalog entry for a rollout. Sub-agent rollouts are not listed.
pub fn entry_for(path: &Path, names: &HashMap<String, String>) -> Option<CatalogEntry> {
    let id = thread_id_of(path)?;
    let mut cwd = None;
    let mut subagent = false;
    let mut first_prompt = None;
    let compressed = path.extension().is_some_and(|e| e == "zst");
    if !compressed {
        let _ = jsonl::for_each_row(path, 4 * 1024 * 1024, &mut |row| {
            let Some(r) = row else { return true };
            if r.get("type").and_then(Value::as_str) == Some("session_meta") {
                let p = &r["payload"];
                cwd = p.get("cwd").and_then(Value::as_str).map(str::to_string);
                subagent = p.get("source").is_some_and(|s| s.get("subagent").is_some());
                return !subagent;
            }
            if let CodexRow::Human(..) = classify_row(r) {
                first_prompt = r
                    .pointer("/payload/item/content/0/text")
                    .or_else(|| r.pointer("/payload/message"))
                    .and_then(Value::as_str)
                    .and_then(crate::title_of);
                return false;
            }
            true
        });
    }
    if subagent {
        return None;
    }
    let title = names.get(&id).and_then(|n| crate::title_of(n)).or(first_prompt);
    Some(CatalogEntry::of_file(CatalogId::Codex, id, title, cwd, path))
}

pub fn adopt(homes: &Homes, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let not_found = || UpstreamError::NotFound { catalog: CatalogId::Codex, thread: thread_id.to_string() };
    let file = list_files(homes)
        .into_iter()
        .find(|f| thread_id_of(f).as_deref() == Some(thread_id))
        .ok_or_else(not_found)?;
    let entry = entry_for(&file, &thread_names(homes)).ok_or_else(not_found)?;
    link_file(entry, file, Some(&homes.codex_dir()))
}

/// Adopts the rollout a hook names (`<codex home>/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl`). The
/// TUI writes it only with the first turn, so it may not exist yet: then the link waits for it, and the
/// first check that finds it takes the baseline there (a resumed or forked thread starts its rollout
/// with copied history, which is no new turn; the typed prompts are the hooks' to record).
pub fn adopt_file(file: &Path, thread_id: &str) -> Result<Adoption, UpstreamError> {
    let codex_home = file
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "sessions"))
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let entry = entry_for(file, &HashMap::new())
        .filter(|_| file.is_file())
        .unwrap_or_else(|| CatalogEntry::unwritten(CatalogId::Codex, thread_id, file));
    link_file(
        CatalogEntry { thread_id: thread_id.to_string(), ..entry },
        file.to_path_buf(),
        codex_home.as_deref(),
    )
}

fn link_file(
    entry: CatalogEntry,
    file: PathBuf,
    codex_home: Option<&Path>,
) -> Result<Adoption, UpstreamError> {
    let thread_id = entry.thread_id.clone();
    let file = if file.extension().is_some_and(|e| e == "zst") {
        // Baseline against the plain form; the compressed one is read once materialised.
        file.with_extension("")
    } else {
        file
    };
    let marker = if file.is_file() {
        jsonl::baseline(&file, &mut CodexClassifier::default())
            .map_err(|e| UpstreamError::Io { path: file.clone(), source: e })?
    } else {
        let mut extra = Map::new();
        extra.insert(jsonl::AWAITING_FILE.into(), json!(true));
        jsonl::JsonlMarker { offset: 0, humans: None, extra, ..Default::default() }
    };
    let mut reference = json!({ "filePath": file.to_string_lossy(), "threadId": thread_id });
    if let Some(home) = codex_home {
        reference["codexHome"] = json!(home.to_string_lossy());
    }
    Ok(Adoption { entry, link: UpstreamLink::new(CatalogId::Codex, &reference, marker.to_json()) })
}

/// Where a rollout may have moved: compressed next to it, or into `archived_sessions/`.
fn relocations(reference: &Value, path: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut zst = path.as_os_str().to_owned();
    zst.push(".zst");
    v.push(PathBuf::from(zst));
    if let (Some(home), Some(name)) = (reference.get("codexHome").and_then(Value::as_str), path.file_name()) {
        let archived = Path::new(home).join("archived_sessions").join(name);
        let mut az = archived.as_os_str().to_owned();
        az.push(".zst");
        v.push(archived);
        v.push(PathBuf::from(az));
    }
    v
}

pub fn check(probe: &Probe<'_>) -> CheckOutcome {
    let Some(path) = crate::reference_path(probe.reference_json) else {
        return CheckOutcome::Inconclusive("bad codex reference".into());
    };
    // The marker's end read once for both questions (`check_file` would read it again to learn that
    // an idle file is idle, most ticks' only answer).
    let end = jsonl::MarkerEnd::parse(probe.marker_json);
    if end.as_ref().is_some_and(|end| end.awaits_file()) {
        return first_sight(&path);
    }
    if end.is_some_and(|end| end.is_idle_at(&path)) {
        return CheckOutcome::NoChange;
    }
    let mut cls = CodexClassifier::default();
    match jsonl::check_file(&path, probe.marker_json, probe.own_recent_user_texts, &mut cls) {
        CheckOutcome::Missing => {
            let Ok(reference) = serde_json::from_str::<Value>(probe.reference_json) else {
                return CheckOutcome::Inconclusive("bad codex reference".into());
            };
            // Compressed or archived rollouts are not missing.
            for alt in relocations(&reference, &path) {
                if alt.extension().is_some_and(|e| e == "zst") {
                    if alt.is_file() {
                        return CheckOutcome::Inconclusive(format!(
                            "rollout is compressed at {}",
                            alt.display()
                        ));
                    }
                } else if alt.is_file() {
                    return jsonl::check_file(&alt, probe.marker_json, probe.own_recent_user_texts, &mut cls);
                }
            }
            CheckOutcome::Missing
        }
        o => o,
    }
}

/// A link adopted before its rollout existed: not missing while the rollout is unwritten (an idle TUI
/// writes nothing); once it is there, the baseline is its end, with nothing reported.
fn first_sight(path: &Path) -> CheckOutcome {
    if !path.is_file() {
        return CheckOutcome::Inconclusive("the rollout is not written yet".into());
    }
    match jsonl::baseline(path, &mut CodexClassifier::default()) {
        Ok(m) => CheckOutcome::rebaselined(m.to_json(), format!("baseline:{}", m.offset)),
        Err(e) => CheckOutcome::Inconclusive(format!("cannot read {}: {e}", path.display())),
    }
}

/// Codex as an upstream source.
pub static SOURCE: crate::source::Source = crate::source::Source {
    id: CatalogId::Codex,
    name: "codex",
    aliases: &[],
    upstream_kind: "codex-app-server",
    candidates: list_files,
    entries: |homes, files, step| {
        let names = thread_names(homes);
        crate::source::entries_per_file(files, step, |f| entry_for(f, &names))
    },
    links: crate::source::LinkOps::unbatched(adopt, adopt_file, check),
    hook: crate::source::HookSpec {
        cli: crate::hook::HookCli::Codex,
        aliases: &[],
        // No `SessionEnd` (and the sub-agent events fire only with `multi_agent_v2`); accepted all the same.
        installed: crate::hook::CLAUDE_EVENTS.split_at(7).0,
        accepted: crate::hook::CLAUDE_EVENTS,
        turn_id_field: Some("turn_id"),
    },
    installer: crate::source::Installer::Settings(crate::source::SettingsHooks {
        user_env: "CODEX_HOME",
        under_env: "hooks.json",
        under_home: ".codex/hooks.json",
        project: ".codex/hooks.json",
        comments: false,
        named_handlers_ms: false,
        trust: true,
    }),
    tested_version: "0.171",
};
