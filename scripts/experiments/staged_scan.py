"""What a read of the staging table costs at most (issue 13; schema 6): plain SQL through Python's sqlite3.

The staging table has no per-session index. A `changesSince` page that reaches past the log reads one
session's staged rows newest first from its head event's id down (`log.rs` `STAGED_NEWEST_FIRST`), and
stops at the first row it needs. The worst case is a session whose oldest staged row is the table's first:
the scan then walks every staged row. This times that worst case, and the common one (the rows needed are
the last few), for tables of 1,024 to 16,384 rows spread over 100 sessions, with the store's row.

Usage: python3 staged_scan.py
"""
import sqlite3
import time

STAGED = """
CREATE TABLE s (id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, agent_id TEXT NOT NULL,
 sequence INTEGER NOT NULL, session_id TEXT, kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT,
 run_id TEXT, occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT, dedupe_key TEXT) STRICT;
"""
NEWEST_FIRST = ("SELECT * FROM s WHERE id <= ?3 AND session_key = ?1 AND agent_id = ?2 ORDER BY id DESC")


def staged_page(c, key, head_id, wanted):
    """The product's loop: newest first, stop once `wanted` rows of the session are read."""
    out = []
    for row in c.execute(NEWEST_FIRST, (key, "main", head_id)):
        out.append(row)
        if len(out) == wanted:
            break
    return out


def measure(rows, sessions=100, reps=2000):
    c = sqlite3.connect(":memory:")
    c.executescript(STAGED)
    c.executemany(
        "INSERT INTO s VALUES (?, ?, 'main', ?, NULL, 'human_direct_message', 'human', NULL, NULL, ?, "
        "'human message via bench', '{\"channel\":\"bench\"}', NULL)",
        [(i, f"agent:main:subagent:s{i % sessions}", i // sessions + 1, 1_750_000_000_000 + i)
         for i in range(1, rows + 1)])
    key = "agent:main:subagent:s1"  # its first staged row is id 1: the whole table lies above it
    head_id = max(i for i in range(1, rows + 1) if i % sessions == 1)
    every = rows // sessions
    out = {}
    for name, wanted in (("all its staged rows (worst)", every), ("its last 3", 3)):
        start = time.perf_counter()
        for _ in range(reps):
            assert len(staged_page(c, key, head_id, wanted)) == wanted
        out[name] = (time.perf_counter() - start) / reps * 1e6
    return out


if __name__ == "__main__":
    for rows in (1024, 2048, 4096, 16384):
        figures = measure(rows)
        print(f"{rows:5d} staged rows: " + ", ".join(f"{k} {v:.0f} us" for k, v in figures.items()))
