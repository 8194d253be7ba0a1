#!/usr/bin/env bash
# Workspace awareness end to end with the REAL Claude Code and Codex CLIs, offline (the set-up is
# e2e-lib.sh's: a loopback-only network namespace, the fake model fake_llm.py, `sessionwatch serve`, the
# hooks installed by `sessionwatch hooks install`), both sessions in one git repository.
#
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/workspace-e2e.sh [all]
#   tests/agents/workspace-e2e.sh installed    # only answers whether the CLIs are there (0, or 77)
#
# Exit 0: every check passed; 1: a check failed; 77: the CLIs are not installed (skipped).
# The story: A (Claude Code) and B (Codex) say hello in $project. B's model edits a file with apply_patch
# (the fake model's RUN-EDIT marker); A's next model request holds exactly one notice about the
# workspace session, whose reconcile names the file and B. Then A's model edits a file with Write; A's own
# turn holds no new notice; B's next model request holds exactly one, naming the file and A.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/e2e-lib.sh" "$@"
start_services
CLAUDE_TOOLS+=(Write) # Claude's print mode runs only the tools it is allowed
log_lines() { wc -l <"$llm_log" 2>/dev/null || echo 0; }

"$SW" hooks install claude >/dev/null || { echo "FAIL claude: hooks install"; failed=1; }
"$SW" hooks install codex --codex "$CODEX_BIN" --project-dir "$project" >/dev/null ||
  { echo "FAIL codex: hooks install"; failed=1; }

workspace_key() { # the workspace session of $project
  python3 - "$XDG_DATA_HOME/sessionwatch/sessionwatch.db" <<'EOF2'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("\n".join(r[0] for r in c.execute("SELECT session_key FROM sessions WHERE kind = 'workspace'")))
EOF2
}
reconcile_names() { # key since file actor -> true when the events after since name file, by actor
  sw_json status "$1" --since "$2" | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v.get("result", v)
r = r.get("details", r)
ok = any(e["kind"] == "files_changed" and sys.argv[1] in (e.get("payload") or {}).get("paths", [])
         and e.get("actorId") == sys.argv[2] for e in r["stateChanges"]["events"])
sys.exit(0 if ok else 1)' "$3" "$4"
}
turn_notices() { # from session prompt key -> the changesSince list of the turn's last request ("-": none)
  local n since stops
  read -r n since stops <<<"$(turn_in_log "$1" "$2" "$3" "$4")"
  echo "$since"
}

# news_reaches CLI LETTER SESSION FILE OTHER OTHER_KEY: LETTER's session asks for news in a turn of CLI; that
# turn's last model request holds exactly one workspace notice (its changesSince left in $since), whose
# reconcile names FILE, written by the session of OTHER.
news_reaches() {
  local from prompt="$2: anything new from the others?"
  from="$(log_lines)"
  "$1_turn" "$prompt" "$3" >/dev/null
  since="$(turn_notices "$from" "$3" "$prompt" "$ws")"
  check "$1: its next model request holds exactly one workspace notice ($since)" bash -c "[[ '$since' =~ ^[0-9]+$ ]]"
  check "$1: its reconcile names $4 and $5's session" reconcile_names "$ws" "${since:-0}" "$4" "$6"
}

a="$(claude_turn "I am A. Say hello.")" || { echo "FAIL A: claude session"; show_logs; exit 1; }
b="$(codex_turn "I am B. Say hello.")" || { echo "FAIL B: codex session"; show_logs; exit 1; }
akey="agent:main:claude:$a" bkey="agent:main:codex:$b"

# Codex's apply_patch reaches Claude's next model request as one notice.
codex_turn "B: RUN-EDIT $project/from-codex.txt" "$b" >/dev/null
check "codex: the fake model's apply_patch wrote the file" test -s "$project/from-codex.txt"
ws="$(workspace_key)"
check "one workspace session for the repository ($ws)" bash -c "[[ '$ws' == agent:main:workspace:demo-* ]]"
news_reaches claude A "$a" from-codex.txt codex "$bkey"

# Claude's Write reaches Codex's next model request as one notice; Claude's own turn gets none.
from="$(log_lines)"
prompt="A: RUN-EDIT $project/from-claude.txt"
claude_turn "$prompt" "$a" >/dev/null
check "claude: the fake model's Write wrote the file" test -s "$project/from-claude.txt"
own="$(turn_notices "$from" "$a" "$prompt" "$ws")"
check "claude: no new notice for its own edit ($since -> $own)" test "$own" = "$since"
news_reaches codex B "$b" from-claude.txt claude "$akey"
[ "$failed" = 0 ] || show_logs
exit "$failed"
