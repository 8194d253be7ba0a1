"""SQLite fold experiment (issue 37, 16 writers): what would an integer session number in the log's
per-session index save the staging table's fold?

Not a product benchmark (that is `sessionwatch bench kernel`): plain SQL through Python's sqlite3, no
sessionwatch code. A log of N rows over 100 sessions ordered by id (schema 6's shape), then 40 folds of
2,048 staged rows each, timed with their commit, in WAL mode with synchronous=NORMAL:

- text: the log's unique index on (session_key, agent_id, sequence), as the store has it;
- int:  the same rows with a session number, the unique index on (session_no, sequence).

Prints the fold time per 2,048 rows for each, alternated twice. Usage: python3 fold_index.py [log rows]
"""
import sqlite3, tempfile, os, time, sys
N_LOG=int(sys.argv[1]) if len(sys.argv)>1 else 300000
def run(variant):
    d=tempfile.mkdtemp(); c=sqlite3.connect(os.path.join(d,'x.db'), isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA temp_store=MEMORY")
    cols="sequence INTEGER NOT NULL, session_id TEXT, kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT, run_id TEXT, occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT, dedupe_key TEXT"
    if variant=='text':
        c.executescript(f"""CREATE TABLE log (id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, agent_id TEXT NOT NULL, {cols}) STRICT;
        CREATE UNIQUE INDEX l_seq ON log(session_key, agent_id, sequence);
        CREATE UNIQUE INDEX l_dd ON log(session_key, agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
        CREATE INDEX l_occ ON log(occurred_at);
        CREATE TABLE st (id INTEGER PRIMARY KEY, session_key TEXT NOT NULL, agent_id TEXT NOT NULL, {cols}) STRICT;""")
        ins_cols="id, session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key"
    else:
        c.executescript(f"""CREATE TABLE log (id INTEGER PRIMARY KEY, session_no INTEGER NOT NULL, session_key TEXT NOT NULL, agent_id TEXT NOT NULL, {cols}) STRICT;
        CREATE UNIQUE INDEX l_seq ON log(session_no, sequence);
        CREATE UNIQUE INDEX l_dd ON log(session_key, agent_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
        CREATE INDEX l_occ ON log(occurred_at);
        CREATE TABLE st (id INTEGER PRIMARY KEY, session_no INTEGER NOT NULL, session_key TEXT NOT NULL, agent_id TEXT NOT NULL, {cols}) STRICT;""")
        ins_cols="id, session_no, session_key, agent_id, sequence, session_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json, dedupe_key"
    keys=[f"agent:main:subagent:s{s}" for s in range(100)]
    def rows(start,n):
        for i in range(start,start+n):
            s=i%100
            base=[i+1]+([s] if variant!='text' else [])+[keys[s],'main',i//100+1,None,'human_direct_message','human',None,None,1750000000000+i,'human message via bench','{"channel":"bench"}',None]
            yield base
    ph=','.join('?'*len(ins_cols.split(',')))
    # bulk load the log
    c.execute("BEGIN"); c.executemany(f"INSERT INTO log ({ins_cols}) VALUES ({ph})", rows(0,N_LOG)); c.execute("COMMIT")
    t_fold=0; n=N_LOG; folds=0
    for f in range(40):
        c.execute("BEGIN"); c.executemany(f"INSERT INTO st ({ins_cols}) VALUES ({ph})", rows(n,2048)); c.execute("COMMIT")
        t=time.perf_counter()
        c.execute("BEGIN"); c.execute(f"INSERT INTO log ({ins_cols}) SELECT {ins_cols} FROM st ORDER BY id"); c.execute("DELETE FROM st"); c.execute("COMMIT")
        t_fold+=time.perf_counter()-t; n+=2048; folds+=1
    print(f"{variant}: fold of 2048 rows {1e3*t_fold/folds:.2f} ms ({1e6*t_fold/folds/2048:.2f} us/row)")
for v in ['text','int','text','int']: run(v)
