//! sessionwatch-upstream: native session catalogs of other coding agents (Claude Code, Codex,
//! OpenCode, Pi, Gemini CLI), adoption baselines, and per-tick detection of direct human activity.
//!
//! Everything here is read-only towards the upstream stores. The monitor loop, the link table and
//! the HTTP API live elsewhere; this crate is the pure classification plus thin readers.

pub mod claude;
pub mod codex;
pub mod gemini;
pub mod hook;
pub mod json_stream;
pub mod jsonl;
pub mod opencode;
pub mod pi;
pub mod source;
pub mod text;
mod time;
pub mod workspace;

use std::io;
use std::path::{Path, PathBuf};

pub use text::normalize_user_text;

/// The five native catalogs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CatalogId {
    Claude,
    Codex,
    OpenCode,
    Pi,
    Gemini,
}

impl CatalogId {
    pub const ALL: [CatalogId; 5] =
        [CatalogId::Claude, CatalogId::Codex, CatalogId::OpenCode, CatalogId::Pi, CatalogId::Gemini];

    pub fn as_str(self) -> &'static str {
        self.source().name
    }

    /// The name, an alias or the upstream kind, in any case.
    pub fn parse(s: &str) -> Option<CatalogId> {
        let s = s.trim().to_ascii_lowercase();
        source::all()
            .find(|src| src.name == s || src.upstream_kind == s || src.aliases.contains(&s.as_str()))
            .map(|src| src.id)
    }

    /// The `upstream_kind` stored with a link.
    pub fn upstream_kind(self) -> &'static str {
        self.source().upstream_kind
    }
}

impl std::fmt::Display for CatalogId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the five agents keep their stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Homes {
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`: replaces `~/.claude` wholesale.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME` (default `~/.codex`).
    pub codex_home: Option<PathBuf>,
    /// `XDG_DATA_HOME` (default `~/.local/share`); OpenCode uses `<data>/opencode/opencode.db`.
    pub xdg_data_home: Option<PathBuf>,
    /// `OPENCODE_DB`: absolute path, or a name relative to `<data>/opencode`.
    pub opencode_db: Option<PathBuf>,
    /// `PI_CODING_AGENT_DIR` (default `~/.pi/agent`).
    pub pi_agent_dir: Option<PathBuf>,
    /// `PI_CODING_AGENT_SESSION_DIR`: all Pi sessions flat in one directory.
    pub pi_session_dir: Option<PathBuf>,
    /// `GEMINI_CLI_HOME`: the directory holding `.gemini/` (default `~`).
    pub gemini_cli_home: Option<PathBuf>,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

impl Homes {
    /// Homes rooted at `home` with no overrides.
    pub fn with_home(home: impl Into<PathBuf>) -> Homes {
        Homes { home: home.into(), ..Homes::default() }
    }

    /// Read `HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_DATA_HOME`, `OPENCODE_DB`,
    /// `PI_CODING_AGENT_DIR`, `PI_CODING_AGENT_SESSION_DIR` and `GEMINI_CLI_HOME`.
    pub fn from_env() -> Homes {
        Homes {
            home: env_path("HOME").unwrap_or_else(|| PathBuf::from("/")),
            claude_config_dir: env_path("CLAUDE_CONFIG_DIR"),
            codex_home: env_path("CODEX_HOME"),
            xdg_data_home: env_path("XDG_DATA_HOME"),
            opencode_db: env_path("OPENCODE_DB"),
            pi_agent_dir: env_path("PI_CODING_AGENT_DIR"),
            pi_session_dir: env_path("PI_CODING_AGENT_SESSION_DIR"),
            gemini_cli_home: env_path("GEMINI_CLI_HOME"),
        }
    }

    fn expand(&self, p: &Path) -> PathBuf {
        match p.strip_prefix("~") {
            Ok(rest) => self.home.join(rest),
            Err(_) => p.to_path_buf(),
        }
    }

    pub fn claude_dir(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(d) => self.expand(d),
            None => self.home.join(".claude"),
        }
    }

    pub fn codex_dir(&self) -> PathBuf {
        match &self.codex_home {
            Some(d) => self.expand(d),
            None => self.home.join(".codex"),
        }
    }

    pub fn opencode_data_dir(&self) -> PathBuf {
        match &self.xdg_data_home {
            Some(d) => self.expand(d).join("opencode"),
            None => self.home.join(".local/share/opencode"),
        }
    }

    pub fn opencode_db_path(&self) -> PathBuf {
        match &self.opencode_db {
            Some(p) if p.is_absolute() || p.starts_with("~") => self.expand(p),
            Some(p) => self.opencode_data_dir().join(p),
            None => self.opencode_data_dir().join("opencode.db"),
        }
    }

    pub fn pi_agent_dir(&self) -> PathBuf {
        match &self.pi_agent_dir {
            Some(d) => self.expand(d),
            None => self.home.join(".pi/agent"),
        }
    }

    /// Directories that may hold Pi sessions (per-cwd subfolders or flat files).
    pub fn pi_session_dirs(&self) -> Vec<PathBuf> {
        let mut v = vec![self.pi_agent_dir().join("sessions")];
        if let Some(d) = &self.pi_session_dir {
            v.insert(0, self.expand(d));
        }
        v
    }
}

/// One native session on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogEntry {
    pub catalog_id: CatalogId,
    pub thread_id: String,
    pub title: Option<String>,
    pub cwd: Option<String>,
    pub updated_at_ms: i64,
    /// File path (JSONL sources) or database path (OpenCode).
    pub location: String,
}

impl CatalogEntry {
    /// The entry of a session kept in its own file `path` (the JSONL sources): updated when the file was.
    pub fn of_file(
        catalog_id: CatalogId,
        thread_id: String,
        title: Option<String>,
        cwd: Option<String>,
        path: &Path,
    ) -> CatalogEntry {
        CatalogEntry {
            catalog_id,
            thread_id,
            title,
            cwd,
            updated_at_ms: mtime_ms(path),
            location: path.to_string_lossy().into_owned(),
        }
    }

    /// The entry of a session whose file `path` is not written yet (a hook named it first).
    pub fn unwritten(catalog_id: CatalogId, thread_id: &str, path: &Path) -> CatalogEntry {
        CatalogEntry {
            catalog_id,
            thread_id: thread_id.to_string(),
            title: None,
            cwd: None,
            updated_at_ms: 0,
            location: path.to_string_lossy().into_owned(),
        }
    }
}

/// What we store for an adopted session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamLink {
    pub catalog_id: CatalogId,
    pub upstream_kind: &'static str,
    /// Opaque JSON: where the session lives.
    pub reference_json: String,
    /// Opaque JSON: how far we have classified.
    pub marker_json: String,
}

impl UpstreamLink {
    /// A link to the session of `catalog_id` that `reference` locates, with the catalog's upstream kind.
    pub fn new(catalog_id: CatalogId, reference: &serde_json::Value, marker_json: String) -> UpstreamLink {
        UpstreamLink {
            catalog_id,
            upstream_kind: catalog_id.upstream_kind(),
            reference_json: reference.to_string(),
            marker_json,
        }
    }

    /// A link to the session in `file`, located by the file alone (`{filePath}`).
    pub fn to_file(catalog_id: CatalogId, file: &Path, marker_json: String) -> UpstreamLink {
        UpstreamLink::new(catalog_id, &serde_json::json!({ "filePath": file.to_string_lossy() }), marker_json)
    }
}

/// Result of adopting a native session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adoption {
    pub entry: CatalogEntry,
    /// The link, with its marker at the baseline (history before adoption never notifies).
    pub link: UpstreamLink,
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{catalog} session {thread} not found")]
    NotFound { catalog: CatalogId, thread: String },
    #[error("invalid thread id {0:?}")]
    InvalidThreadId(String),
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("opencode database {path}: {message}")]
    Sqlite { path: PathBuf, message: String },
}

/// One link's state for one tick.
#[derive(Clone, Copy, Debug)]
pub struct Probe<'a> {
    pub reference_json: &'a str,
    pub marker_json: &'a str,
    /// Up to 10 recent gateway-side user messages (self-echo filter).
    pub own_recent_user_texts: &'a [String],
}

/// The rows a check counted as human turns: what the [`CheckOutcome::Activity`] it reports says of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CountedTurns {
    pub turns: u32,
    /// The newest timestamp among them.
    pub max_ts: Option<i64>,
    /// The turn id of the last one (a JSONL row's [`jsonl::RowClassifier::turn_id`], an OpenCode message id).
    pub last_turn: Option<String>,
}

impl CountedTurns {
    pub(crate) fn add(&mut self, ts: Option<i64>, turn_id: Option<String>) {
        self.turns += 1;
        self.last_turn = turn_id;
        // `None` orders before any timestamp: a row without one leaves the newest as it was.
        self.max_ts = self.max_ts.max(ts);
    }
}

/// What one tick found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Nothing new was classified; keep the marker.
    NoChange,
    /// New rows were classified. `human_turns` may be 0 (then only advance the marker).
    /// Record the event first, then store `next_marker_json`.
    /// `turn_id`: the CLI's own id of the last counted human turn (Claude `promptId`, Codex `turn_id`),
    /// when the source has one: hooks see the same id, so a turn seen by both is recorded once.
    Activity {
        human_turns: u32,
        next_marker_json: String,
        occurred_at_ms: Option<i64>,
        dedupe_id: String,
        turn_id: Option<String>,
    },
    /// The source is definitively gone (ENOENT, not a regular file, thread row absent).
    Missing,
    /// Could not tell (read error, permission, busy database, bad reference). Never evidence of
    /// deletion.
    Inconclusive(String),
}

impl CheckOutcome {
    /// A re-baseline: the marker moves to `next_marker_json` and no human turn is reported
    /// (`dedupe_id` names the move).
    pub(crate) fn rebaselined(next_marker_json: String, dedupe_id: String) -> CheckOutcome {
        CheckOutcome::Activity {
            human_turns: 0,
            next_marker_json,
            occurred_at_ms: None,
            dedupe_id,
            turn_id: None,
        }
    }
}

/// Map an I/O error to an outcome: only "definitively gone" errors are `Missing`.
pub fn io_outcome(e: &io::Error, path: &Path) -> CheckOutcome {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => CheckOutcome::Missing,
        _ => CheckOutcome::Inconclusive(format!("{}: {e}", path.display())),
    }
}

/// Discover all native sessions. Never writes; OpenCode's database is opened read-only.
/// `progress(done, total)` is called as sources are examined.
pub fn discover(homes: &Homes, progress: &mut dyn FnMut(usize, usize)) -> Vec<CatalogEntry> {
    let candidates: Vec<(&source::Source, Vec<PathBuf>)> =
        source::all().map(|src| (src, (src.candidates)(homes))).collect();
    let total = candidates.iter().map(|(_, c)| c.len()).sum();
    let mut done = 0usize;
    progress(done, total);
    let mut out = Vec::new();
    for (src, files) in &candidates {
        out.extend((src.entries)(homes, files, &mut || {
            done += 1;
            progress(done, total);
        }));
    }
    out.sort_by(|a, b| {
        b.updated_at_ms
            .cmp(&a.updated_at_ms)
            .then(a.catalog_id.cmp(&b.catalog_id))
            .then(a.thread_id.cmp(&b.thread_id))
    });
    out
}

/// Find a native session and build its link with a baseline marker at the current end.
pub fn adopt(homes: &Homes, catalog_id: CatalogId, thread_id: &str) -> Result<Adoption, UpstreamError> {
    if thread_id.is_empty()
        || thread_id.len() > 256
        || !thread_id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
    {
        return Err(UpstreamError::InvalidThreadId(thread_id.to_string()));
    }
    (catalog_id.source().links.adopt)(homes, thread_id)
}

/// Adopts the transcript file a hook names (Claude Code, Codex, Gemini CLI and the Pi extension; the
/// OpenCode plugin names its database). A JSONL file may not exist yet; the baseline is then its start.
pub fn adopt_transcript(
    catalog_id: CatalogId,
    thread_id: &str,
    file: &Path,
) -> Result<Adoption, UpstreamError> {
    (catalog_id.source().links.adopt_transcript)(file, thread_id)
}

/// One monitoring tick for one link. Bounded in time (one 1 MiB window per JSONL source, one
/// indicator query plus at most one session read for OpenCode).
pub fn check(catalog_id: CatalogId, probe: &Probe<'_>) -> CheckOutcome {
    (catalog_id.source().links.check)(probe)
}

/// One batched indicator query for many OpenCode links on one database; a session is read in
/// full only when its event sequence advanced.
pub fn check_opencode_batch(db_path: &Path, probes: &[Probe<'_>]) -> Vec<CheckOutcome> {
    opencode::check_batch(db_path, probes)
}

/// Runs one catalog's checks (blocking) for `probes`, in order.
/// What the gateway's monitor and `sessionwatch node` both run. OpenCode links sharing a database are checked in one
/// batched query; a panic in one check costs only that link.
pub fn check_many(catalog: CatalogId, probes: &[Probe<'_>]) -> Vec<CheckOutcome> {
    catalog.source().links.check_many(probes)
}

/// File path from a `{filePath}` reference (read on every tick of every file link: no JSON tree built).
pub(crate) fn reference_path(reference_json: &str) -> Option<PathBuf> {
    #[derive(serde::Deserialize)]
    struct FileReference {
        #[serde(rename = "filePath")]
        file_path: PathBuf,
    }
    let reference: FileReference = serde_json::from_str(reference_json).ok()?;
    (!reference.file_path.as_os_str().is_empty()).then_some(reference.file_path)
}

/// List `dir`'s entries, sorted; unreadable directories give nothing.
pub(crate) fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

pub(crate) fn mtime_ms(path: &Path) -> i64 {
    std::fs::metadata(path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// First `n` characters of a one-line version of `s`.
pub(crate) fn title_of(s: &str) -> Option<String> {
    let n = normalize_user_text(s);
    if n.is_empty() {
        return None;
    }
    Some(n.chars().take(120).collect())
}
