//! DDL and versioned migrations for the SQLite store.

use crate::{Result, StoreError};
use rusqlite::Connection;

/// Bump with every migration appended to [`MIGRATIONS`].
pub const SCHEMA_VERSION: i64 = 11;

const MIGRATIONS: &[&str] = &[
    // 1: the signal log, heads, cursors and sessions.
    r#"
CREATE TABLE sessionwatch_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

-- Clustered by (session_key, agent_id, sequence): a changesSince page is one contiguous range scan.
-- id orders rows globally (the row cap keeps the newest); it is one more than the largest id present.
CREATE TABLE session_state_events (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  id INTEGER NOT NULL,
  session_id TEXT,
  kind TEXT NOT NULL,
  actor_type TEXT NOT NULL CHECK (actor_type IN ('human','agent','system')),
  actor_id TEXT,
  run_id TEXT,
  occurred_at INTEGER NOT NULL,
  summary TEXT NOT NULL,
  payload_json TEXT,
  dedupe_key TEXT,
  PRIMARY KEY (session_key, agent_id, sequence)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX idx_events_id ON session_state_events (id);
CREATE UNIQUE INDEX idx_events_session_dedupe ON session_state_events (session_key, agent_id, dedupe_key)
  WHERE dedupe_key IS NOT NULL;
CREATE INDEX idx_events_occurred_at ON session_state_events (occurred_at);

CREATE TABLE session_state_heads (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  head INTEGER NOT NULL CHECK (head >= 0),
  floor INTEGER NOT NULL DEFAULT 0 CHECK (floor >= 0 AND floor <= head),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE session_watch_cursors (
  watcher_session_key TEXT NOT NULL,
  target_session_key TEXT NOT NULL,
  last_seen_sequence INTEGER NOT NULL DEFAULT 0,
  notified_sequence INTEGER NOT NULL DEFAULT 0,
  material_sequence INTEGER NOT NULL DEFAULT 0,
  provenance TEXT NOT NULL DEFAULT 'explicit' CHECK (provenance IN ('explicit','ambient-group')),
  watcher_store_path TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_session_key, target_session_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX idx_cursors_target ON session_watch_cursors (target_session_key);

CREATE TABLE sessions (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  chat_type TEXT,
  channel TEXT,
  label TEXT,
  spawned_by TEXT,
  created_via TEXT,
  goal_objective TEXT,
  goal_status TEXT,
  host_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX idx_sessions_updated ON sessions (updated_at);

CREATE TABLE session_messages (
  id INTEGER PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  role TEXT NOT NULL,
  text TEXT NOT NULL,
  run_id TEXT,
  from_session TEXT,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_messages_session ON session_messages (session_key, agent_id, id);

CREATE TABLE session_inbox (
  id INTEGER PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  run_id TEXT,
  from_session TEXT,
  text TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_inbox_session ON session_inbox (session_key, agent_id, id);

CREATE TABLE session_runs (
  run_id TEXT PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  requester TEXT,
  is_child INTEGER NOT NULL DEFAULT 0,
  status TEXT,
  reply TEXT,
  superseded INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  finished_at INTEGER
) STRICT;
CREATE INDEX idx_runs_session ON session_runs (session_key, agent_id);

CREATE TABLE session_upstream_links (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  catalog_id TEXT NOT NULL,
  host_id TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  upstream_kind TEXT NOT NULL,
  upstream_ref_json TEXT NOT NULL,
  last_marker_json TEXT NOT NULL,
  last_scanned_at INTEGER,
  missing_streak INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX idx_links_catalog ON session_upstream_links (catalog_id);
"#,
    // 2: remote nodes (`sessionwatch node`): a name and the SHA-256 of the token the gateway issued.
    r#"
CREATE TABLE session_nodes (
  name TEXT PRIMARY KEY,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER
) STRICT;
"#,
    // 3: the settled cursors on a target, which an append reads (`watch::settled_cursors_on`): a pending
    // cursor is not in it, so a burst to a target with many watchers reads none after the first event.
    r#"
CREATE INDEX idx_cursors_settled_target ON session_watch_cursors (target_session_key)
  WHERE material_sequence <= last_seen_sequence;
"#,
    // 4: no new object. From here a session's head is derived, the larger of its stored head and its last
    // sequence in the log (`log::HEAD_ROW`), and an append writes no head row: an older version would
    // take the stored head for the head and number its appends from there, so it must refuse this file.
    "",
    // 5: the log ordered by `id`, its rowid, instead of clustered by session. An append then writes at
    // the right edge of the table, whose leaves SQLite fills whole (an integer key, split by
    // `balance_quick`); clustered by session, every append dirtied its session's leaf, and a split of a
    // text-keyed B-tree rewrote its siblings: 20.0 WAL pages per commit of 8 appends over 100 sessions
    // against 14.0 (`python3 scripts/experiments/sqlite_layout.py 40000 8`). A page of one session is
    // read through the unique index on `(session_key, agent_id, sequence)`. The rows are copied in `id`
    // order; the row cap's `id` and every sequence stay as they were. The actor check is spelled with
    // `OR`: SQLite checks an `IN` list of three constants by building a temporary B-tree for every insert
    // (3 % of the writer's time).
    r#"
CREATE TABLE session_state_events_by_id (
  id INTEGER PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  session_id TEXT,
  kind TEXT NOT NULL,
  actor_type TEXT NOT NULL CHECK (actor_type = 'human' OR actor_type = 'agent' OR actor_type = 'system'),
  actor_id TEXT,
  run_id TEXT,
  occurred_at INTEGER NOT NULL,
  summary TEXT NOT NULL,
  payload_json TEXT,
  dedupe_key TEXT
) STRICT;
INSERT INTO session_state_events_by_id (id, session_key, agent_id, sequence, session_id, kind, actor_type,
  actor_id, run_id, occurred_at, summary, payload_json, dedupe_key)
  SELECT id, session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, run_id, occurred_at,
    summary, payload_json, dedupe_key
  FROM session_state_events ORDER BY id;
DROP TABLE session_state_events;
ALTER TABLE session_state_events_by_id RENAME TO session_state_events;
CREATE UNIQUE INDEX idx_events_session_sequence ON session_state_events (session_key, agent_id, sequence);
CREATE UNIQUE INDEX idx_events_session_dedupe ON session_state_events (session_key, agent_id, dedupe_key)
  WHERE dedupe_key IS NOT NULL;
CREATE INDEX idx_events_occurred_at ON session_state_events (occurred_at);
"#,
    // 6: appends go to a staging table, folded into the log every `SqliteOptions::staged_rows` ids. A
    // staged row writes no per-session index entry: with one per append, a commit of 8 appends over 100
    // sessions dirtied 8 index leaves, one per session, most of its 11 WAL pages. A fold writes each
    // session's leaf once for all its staged rows. A session's staged sequences are all above its logged
    // ones. The head row is moved by every append (a small table: its rows share leaves), with the head
    // event's id and time, so a head is read without scanning the staging table. Every session in the
    // log gets its head row here. The staging table has the log's columns (migration 5), spelled out
    // again: a released migration's text never changes, so the two are not built from one fragment.
    r#"
CREATE TABLE session_state_events_staged (
  id INTEGER PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  session_id TEXT,
  kind TEXT NOT NULL,
  actor_type TEXT NOT NULL CHECK (actor_type = 'human' OR actor_type = 'agent' OR actor_type = 'system'),
  actor_id TEXT,
  run_id TEXT,
  occurred_at INTEGER NOT NULL,
  summary TEXT NOT NULL,
  payload_json TEXT,
  dedupe_key TEXT
) STRICT;
CREATE UNIQUE INDEX idx_staged_session_dedupe
  ON session_state_events_staged (session_key, agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
ALTER TABLE session_state_heads ADD COLUMN head_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_state_heads ADD COLUMN head_at INTEGER NOT NULL DEFAULT 0;
INSERT INTO session_state_heads (session_key, agent_id, head, floor, updated_at, head_id, head_at)
  SELECT e.session_key, e.agent_id, e.sequence, 0, e.occurred_at, e.id, e.occurred_at
  FROM session_state_events e
  WHERE e.sequence = (SELECT MAX(m.sequence) FROM session_state_events m
                      WHERE m.session_key = e.session_key AND m.agent_id = e.agent_id)
  ON CONFLICT (session_key, agent_id) DO UPDATE
    SET head = MAX(head, excluded.head), head_id = excluded.head_id, head_at = excluded.head_at;
"#,
    // 7: what a native CLI session is doing and where (`sessionwatch sessions`): the working directory its
    // hooks or catalog entry reported, and its state from the hook lifecycle or the file monitor. Kept in
    // the session row so a restart remembers both and a deleted session takes them along.
    r#"
ALTER TABLE sessions ADD COLUMN cwd TEXT;
ALTER TABLE sessions ADD COLUMN native_state TEXT
  CHECK (native_state IS NULL OR native_state IN ('running', 'waiting', 'idle'));
-- A listing names each session's children: found by index, not by a scan of every spawned session.
CREATE INDEX idx_sessions_spawned_by ON sessions (spawned_by) WHERE spawned_by IS NOT NULL;
"#,
    // 8: a third provenance, `workspace`: a member session's watch on its workspace session. SQLite cannot
    // alter a CHECK, so the table is rebuilt with its rows and its two indexes (migrations 1 and 3).
    r#"
CREATE TABLE session_watch_cursors_v8 (
  watcher_session_key TEXT NOT NULL,
  target_session_key TEXT NOT NULL,
  last_seen_sequence INTEGER NOT NULL DEFAULT 0,
  notified_sequence INTEGER NOT NULL DEFAULT 0,
  material_sequence INTEGER NOT NULL DEFAULT 0,
  provenance TEXT NOT NULL DEFAULT 'explicit'
    CHECK (provenance IN ('explicit','ambient-group','workspace')),
  watcher_store_path TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_session_key, target_session_key)
) STRICT, WITHOUT ROWID;
INSERT INTO session_watch_cursors_v8 SELECT watcher_session_key, target_session_key, last_seen_sequence,
  notified_sequence, material_sequence, provenance, watcher_store_path, updated_at
  FROM session_watch_cursors;
DROP TABLE session_watch_cursors;
ALTER TABLE session_watch_cursors_v8 RENAME TO session_watch_cursors;
CREATE INDEX idx_cursors_target ON session_watch_cursors (target_session_key);
CREATE INDEX idx_cursors_settled_target ON session_watch_cursors (target_session_key)
  WHERE material_sequence <= last_seen_sequence;
"#,
    // 9: the pending cursors (`M > L`), which a start's sweep, the recovery claim and a prune's settling
    // read: without it each scanned every cursor (a start over 1M cursors, 1k of them pending, took
    // 16-20x one over 10k). Only a cursor's move in or out of pending touches it.
    r#"
CREATE INDEX idx_cursors_pending ON session_watch_cursors (watcher_session_key, target_session_key)
  WHERE material_sequence > last_seen_sequence;
"#,
    // 10: the version of the watched links (`Links::watched_links_since`), moved in the writing
    // transaction by every write of a link and by every cursor added to or removed from a linked session
    // (what makes a link watched; no write changes a cursor's target), so the monitor keeps the links it
    // read while the version stays: an idle tick reads one row instead of every link. Cursors on sessions
    // without a link (nearly all) leave it alone, and a cursor's moves (`save_cursor`'s upsert) fire no
    // trigger. A migration that rebuilds either table must create its triggers again (they go with it).
    r#"
CREATE TABLE watched_links_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
) STRICT;
INSERT INTO watched_links_version (id, version) VALUES (1, 0);
CREATE TRIGGER watched_links_link_inserted AFTER INSERT ON session_upstream_links
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
CREATE TRIGGER watched_links_link_updated AFTER UPDATE ON session_upstream_links
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
CREATE TRIGGER watched_links_link_deleted AFTER DELETE ON session_upstream_links
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
CREATE TRIGGER watched_links_cursor_inserted AFTER INSERT ON session_watch_cursors
  WHEN EXISTS (SELECT 1 FROM session_upstream_links WHERE session_key = NEW.target_session_key)
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
CREATE TRIGGER watched_links_cursor_deleted AFTER DELETE ON session_watch_cursors
  WHEN EXISTS (SELECT 1 FROM session_upstream_links WHERE session_key = OLD.target_session_key)
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
"#,
    // 11: the CHECKs on a cursor's provenance and a session's native state spelled with `OR`, as the log's
    // actor check is (migration 5): SQLite checks an `IN` list by building a temporary B-tree, twice per
    // cursor upsert, and that B-tree's pages, freed as the statement ends, made glibc give memory back to
    // the kernel (`madvise`, a TLB flush on every core) on most appends that moved a cursor (save_cursor
    // was a tenth of the gateway's CPU time under inbound turns). Both tables are rebuilt with their rows,
    // their indexes (migrations 1, 3, 7, 9) and the cursors' triggers (migration 10); columns in the
    // same order.
    r#"
CREATE TABLE session_watch_cursors_v11 (
  watcher_session_key TEXT NOT NULL,
  target_session_key TEXT NOT NULL,
  last_seen_sequence INTEGER NOT NULL DEFAULT 0,
  notified_sequence INTEGER NOT NULL DEFAULT 0,
  material_sequence INTEGER NOT NULL DEFAULT 0,
  provenance TEXT NOT NULL DEFAULT 'explicit'
    CHECK (provenance = 'explicit' OR provenance = 'ambient-group' OR provenance = 'workspace'),
  watcher_store_path TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_session_key, target_session_key)
) STRICT, WITHOUT ROWID;
INSERT INTO session_watch_cursors_v11 SELECT watcher_session_key, target_session_key, last_seen_sequence,
  notified_sequence, material_sequence, provenance, watcher_store_path, updated_at
  FROM session_watch_cursors;
DROP TABLE session_watch_cursors;
ALTER TABLE session_watch_cursors_v11 RENAME TO session_watch_cursors;
CREATE INDEX idx_cursors_target ON session_watch_cursors (target_session_key);
CREATE INDEX idx_cursors_settled_target ON session_watch_cursors (target_session_key)
  WHERE material_sequence <= last_seen_sequence;
CREATE INDEX idx_cursors_pending ON session_watch_cursors (watcher_session_key, target_session_key)
  WHERE material_sequence > last_seen_sequence;
CREATE TRIGGER watched_links_cursor_inserted AFTER INSERT ON session_watch_cursors
  WHEN EXISTS (SELECT 1 FROM session_upstream_links WHERE session_key = NEW.target_session_key)
  BEGIN UPDATE watched_links_version SET version = version + 1; END;
CREATE TRIGGER watched_links_cursor_deleted AFTER DELETE ON session_watch_cursors
  WHEN EXISTS (SELECT 1 FROM session_upstream_links WHERE session_key = OLD.target_session_key)
  BEGIN UPDATE watched_links_version SET version = version + 1; END;

CREATE TABLE sessions_v11 (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  chat_type TEXT,
  channel TEXT,
  label TEXT,
  spawned_by TEXT,
  created_via TEXT,
  goal_objective TEXT,
  goal_status TEXT,
  host_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  cwd TEXT,
  native_state TEXT
    CHECK (native_state IS NULL OR native_state = 'running' OR native_state = 'waiting' OR native_state = 'idle'),
  PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
INSERT INTO sessions_v11 SELECT session_key, agent_id, session_id, kind, chat_type, channel, label, spawned_by,
  created_via, goal_objective, goal_status, host_id, created_at, updated_at, cwd, native_state
  FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v11 RENAME TO sessions;
CREATE INDEX idx_sessions_updated ON sessions (updated_at);
CREATE INDEX idx_sessions_spawned_by ON sessions (spawned_by) WHERE spawned_by IS NOT NULL;
"#,
];

/// Applies missing migrations; refuses a database written by a newer version.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    migrate_to(conn, SCHEMA_VERSION)
}

/// Applies the migrations up to `version` (at most [`SCHEMA_VERSION`]): what version `version` of
/// sessionwatch left, which the upgrade tests start from.
pub fn migrate_to(conn: &mut Connection, version: i64) -> Result<()> {
    let found = check_compatible(conn)?;
    let upto = version.clamp(0, SCHEMA_VERSION) as usize;
    for (i, ddl) in MIGRATIONS.iter().enumerate().take(upto).skip(found as usize) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch(ddl)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// Read-only: answers the schema version of a database this version can use (0 for a new, empty one).
/// Refuses a database written by a newer version, and any database that is not ours: every object in it
/// (tables, views, indexes, triggers) must be exactly what our migrations up to its `user_version`
/// create — an empty file at version 0, never someone else's tables, views or version number.
pub fn check_compatible(conn: &Connection) -> Result<i64> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew { found, supported: SCHEMA_VERSION });
    }
    let not_ours =
        |reason: String| StoreError::Corrupt { path: conn.path().unwrap_or("").to_string(), reason };
    if found < 0 {
        return Err(not_ours(format!("its user_version {found} is not a sessionwatch schema version")));
    }
    let have = schema_objects(conn)?;
    let want = expected_objects(found)?;
    if let Some((kind, name, _)) = have.iter().find(|o| !want.contains(o)) {
        return Err(not_ours(if found == 0 {
            format!("it holds a {kind} {name:?} but no sessionwatch schema version")
        } else {
            format!("it holds a {kind} {name:?} that sessionwatch schema version {found} does not have")
        }));
    }
    if let Some((kind, name, _)) = want.iter().find(|o| !have.contains(o)) {
        return Err(not_ours(format!(
            "its user_version says sessionwatch schema {found} but the {kind} {name:?} is missing"
        )));
    }
    Ok(found)
}

/// (type, name, table) of every object but SQLite's own (`sqlite_…`, e.g. `sqlite_stat1` from ANALYZE).
/// Not the SQL text: a migration's whitespace is not part of the contract.
type SchemaObject = (String, String, String);

fn schema_objects(conn: &Connection) -> Result<Vec<SchemaObject>> {
    let mut stmt = conn.prepare(
        r"SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The objects our migrations create up to `version`, from an in-memory database.
fn expected_objects(version: i64) -> Result<Vec<SchemaObject>> {
    let conn = Connection::open_in_memory()?;
    for ddl in &MIGRATIONS[..version as usize] {
        conn.execute_batch(ddl)?;
    }
    schema_objects(&conn)
}
