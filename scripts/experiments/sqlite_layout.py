"""SQLite layout experiment for issue 13 (16 writers >= 100k durable events/s): is the clustered log the limit?

Not a product benchmark (that is `sessionwatch bench kernel`): plain SQL through Python's sqlite3, no
sessionwatch code, so only the layouts differ. Each commit holds 16 events over 100 sessions (what 16
writers give at best), in WAL mode with synchronous=NORMAL, with the store's schema for the log and heads:

- clustered: each event goes straight into the log clustered by (session, agent, sequence), as schemas 1-4
  had it, so a commit dirties one leaf page of wide rows per session it touches, and their splits rewrite
  siblings (a text-keyed B-tree is not split by SQLite's append-only `balance_quick`);
- by_id:     the log ordered by id, its rowid (schema 5): the rows go to the table's right edge, and each
  event writes one small entry into the unique index on (session, agent, sequence);
- staging:   each event goes into an append-only table ordered by id (one or two pages per commit), folded
  into the clustered log every FOLD events in one transaction; the fold's time is included.

All take the sequence from a heads upsert, as the store did before schema 4. Each prints its rate and the WAL
pages each commit wrote (the WAL is not checkpointed during the run). Usage: python3 sqlite_layout.py
[events] [events per commit]
"""
import os
import sqlite3
import sys
import tempfile
import time

LOG = """
CREATE TABLE e (session_key TEXT NOT NULL, agent_id TEXT NOT NULL, sequence INTEGER NOT NULL, id INTEGER NOT NULL,
 session_id TEXT, kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT, run_id TEXT,
 occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT, dedupe_key TEXT,
 PRIMARY KEY (session_key, agent_id, sequence)) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX e_id ON e(id);
CREATE UNIQUE INDEX e_dedupe ON e(session_key, agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX e_occurred ON e(occurred_at);
CREATE TABLE b (id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, agent_id TEXT NOT NULL,
 sequence INTEGER NOT NULL, session_id TEXT, kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT,
 run_id TEXT, occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT, dedupe_key TEXT) STRICT;
CREATE UNIQUE INDEX b_sequence ON b(session_key, agent_id, sequence);
CREATE UNIQUE INDEX b_dedupe ON b(session_key, agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX b_occurred ON b(occurred_at);
CREATE TABLE h (session_key TEXT NOT NULL, agent_id TEXT NOT NULL, head INTEGER NOT NULL,
 floor INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL, PRIMARY KEY (session_key, agent_id))
 STRICT, WITHOUT ROWID;
CREATE TABLE s (id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, agent_id TEXT NOT NULL,
 sequence INTEGER NOT NULL, session_id TEXT, kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT,
 run_id TEXT, occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT, dedupe_key TEXT) STRICT;
"""
HEAD = ("INSERT INTO h VALUES (?1, 'main', 1, 0, ?2) "
        "ON CONFLICT DO UPDATE SET head = head + 1, updated_at = ?2 RETURNING head")
ROW = "NULL, 'human_direct_message', 'human', NULL, NULL, ?3, 'human message via bench', '{\"channel\":\"bench\"}', NULL"
INTO_LOG = f"INSERT INTO e VALUES (?1, 'main', ?2, ?4, {ROW})"
INTO_STAGING = f"INSERT INTO s VALUES (?4, ?1, 'main', ?2, {ROW})"
INTO_BY_ID = f"INSERT INTO b VALUES (?4, ?1, 'main', ?2, {ROW})"
INTO = {"clustered": INTO_LOG, "by_id": INTO_BY_ID, "staging": INTO_STAGING}
FOLD = ("INSERT INTO e SELECT session_key, agent_id, sequence, id, session_id, kind, actor_type, actor_id, "
        "run_id, occurred_at, summary, payload_json, dedupe_key FROM s ORDER BY session_key, agent_id, sequence")


def run(layout, events, batch, sessions=100, fold=4096):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{layout}.db")
        c = sqlite3.connect(path, isolation_level=None)
        try:
            rate, folding = measure(c, layout, events, batch, sessions, fold)
            frames = (os.path.getsize(path + "-wal") - 32) / (4096 + 24)
            return rate, folding, frames / (events / batch)
        finally:
            c.close()


def measure(c, layout, events, batch, sessions, fold):
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.executescript(LOG)
    keys = [f"agent:main:subagent:s{i}" for i in range(sessions)]
    next_id, staged, folding = 0, 0, 0.0
    start = time.perf_counter()
    for first in range(0, events, batch):
        c.execute("BEGIN IMMEDIATE")
        for i in range(first, first + batch):
            key, now = keys[i % sessions], 1_750_000_000_000 + i
            sequence = c.execute(HEAD, (key, now)).fetchone()[0]
            next_id += 1
            c.execute(INTO[layout], (key, sequence, now, next_id))
        c.execute("COMMIT")
        staged += batch
        if layout == "staging" and staged >= fold:
            t = time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute(FOLD)
            c.execute("DELETE FROM s")
            c.execute("COMMIT")
            folding += time.perf_counter() - t
            staged = 0
    elapsed = time.perf_counter() - start
    return events / elapsed, folding / elapsed


if __name__ == "__main__":
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    for _ in range(2):
        for layout in ("clustered", "by_id", "staging"):
            rate, fold_share, frames = run(layout, events, batch)
            print(f"{layout:9s} {rate:9.0f} events/s  {frames:5.1f} WAL pages per commit"
                  f"  (folding: {fold_share * 100:.0f} % of the time)")
