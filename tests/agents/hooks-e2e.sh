#!/usr/bin/env bash
# End to end with the REAL Claude Code and Codex CLIs, offline: a loopback-only network namespace, a fake
# model (fake_llm.py), `sessionwatch serve`, and the hooks installed by `sessionwatch hooks install`.
#
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/hooks-e2e.sh [claude|codex|all]
#   tests/agents/hooks-e2e.sh installed    # only answers whether the CLIs are there (0, or 77)
#
# The CLIs come from tests/agents/install.sh (SESSIONWATCH_AGENTS_DIR, default ~/.cache/sessionwatch/agents).
# Exit 0: every check passed; 1: a check failed; 77: the CLIs are not installed (skipped).
# The story per CLI: a manager and a worker session; the manager watches the worker; a human types into
# the worker (exactly one human_direct_message, also after the file monitor ticks); the manager's next
# prompt carries the notice (in its hook output and in the model request it causes); a change while the
# manager's model is thinking makes Stop block once, not twice; a Claude sub-agent becomes a spawn edge.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
only="${1:-all}"
. "$here/e2e-lib.sh" "$@"

# A human typing into the worker while the manager's model thinks (see RUN-SIDE-EFFECT in fake_llm.py).
export FAKE_LLM_SIDE_EFFECT="\"$SW\" inbound \"\$(cat '$work/worker')\" 'typed into the worker while the manager thinks' --channel telegram"
start_services

requests_with() { # text -> number of model requests whose body contains text
  python3 - "$llm_log" "$1" <<'EOF'
import sys
n = sum(1 for line in open(sys.argv[1]) if sys.argv[2] in line)
print(n)
EOF
}

tool_results_with_notice() { # worker key -> requests whose MCP tool result holds a notice about it
  python3 - "$llm_log" "$1" <<'EOF'
import json, sys
key = sys.argv[2]
n = 0
for line in open(sys.argv[1]):
    try:
        body = json.loads(line).get("body") or {}
    except ValueError:
        continue
    items = body.get("messages") or body.get("input") or []
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        blocks = it.get("content") if isinstance(it.get("content"), list) else []
        outputs = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if it.get("type") == "function_call_output":
            outputs.append(it)
        text = json.dumps(outputs)
        if ("systemEvents" in text or "Session notices" in text) and key in text and "changed (other actor)" in text:
            n += 1
            break
print(n)
EOF
}

story() { # cli
  local cli="$1" turn="${1}_turn" manager worker mkey wkey n
  manager="$($turn "I am the manager. Say hello.")" || { echo "FAIL $cli: manager session"; failed=1; return; }
  worker="$($turn "I am the worker. Say hello.")" || { echo "FAIL $cli: worker session"; failed=1; return; }
  mkey="agent:main:$cli:$manager" wkey="agent:main:$cli:$worker"
  check "$cli: SessionStart adopted both sessions" \
    bash -c "\"$SW\" status '$wkey' --since 0 --json | grep -q '\"adopted\"' && \"$SW\" status '$mkey' --json >/dev/null"
  sw_json send "$wkey" "take the parser" --watch --as "$mkey" >/dev/null
  local h0
  h0="$(human_events "$wkey")"
  $turn "A human types into the worker: use the new grammar." "$worker" >/dev/null
  n="$(human_events "$wkey")"
  check "$cli: a human prompt in the worker is one human_direct_message ($h0 -> $n)" test "$n" = "$((h0 + 1))"
  sw_json monitor-tick >/dev/null
  n="$(human_events "$wkey")"
  check "$cli: still one after the file monitor ticks ($h0 -> $n)" test "$n" = "$((h0 + 1))"

  local before after a0 a1 a2
  before="$(requests_with "Session \\\"$wkey\\\" changed (other actor)")"
  a0="$(acked)"
  $turn "Manager here: how is the worker doing?" "$manager" >/dev/null
  after="$(requests_with "Session \\\"$wkey\\\" changed (other actor)")"
  a1="$(acked)"
  check "$cli: the manager's next prompt carries the notice to the model ($before -> $after requests)" test "$after" -gt "$before"
  check "$cli: the hook delivered and acknowledged it ($a0 -> $a1)" test "$a1" = "$((a0 + 1))"
  $turn "Manager again: anything new?" "$manager" >/dev/null
  a2="$(acked)"
  check "$cli: delivered once: the next prompt gets nothing ($a1 -> $a2)" test "$a2" = "$a1"

  # Stop: the worker changes while the manager's model is thinking -> Stop blocks once.
  echo "$wkey" > "$work/worker"
  a0="$(acked)"
  before="$(requests_with "sessionwatch: before you finish")"
  $turn "Manager: RUN-SIDE-EFFECT $cli finish up." "$manager" >/dev/null
  after="$(requests_with "sessionwatch: before you finish")"
  a1="$(acked)"
  check "$cli: a change while the model thinks: Stop blocks with the notice ($before -> $after requests)" test "$after" -gt "$before"
  check "$cli: Stop blocked once: one notice acknowledged ($a0 -> $a1)" test "$a1" = "$((a0 + 1))"

  # One identity: the manager's MCP tool call (sessionwatch mcp, no --session) acts as the manager's
  # session, so a change that lands during the turn comes back inside the tool result.
  a0="$(acked)"
  before="$(tool_results_with_notice "$wkey")"
  $turn "Manager: RUN-SIDE-EFFECT CALL-SW $wkey check the worker." "$manager" >/dev/null
  after="$(tool_results_with_notice "$wkey")"
  a1="$(acked)"
  check "$cli: the MCP tool result carries the manager's own notice ($before -> $after requests)" test "$after" -gt "$before"
  check "$cli: ... delivered once ($a0 -> $a1)" test "$a1" = "$((a0 + 1))"
}

if [ "$only" = all ] || [ "$only" = claude ]; then
  "$SW" hooks install claude >/dev/null || { echo "FAIL claude: hooks install"; failed=1; }
  story claude
  # A Claude sub-agent run becomes a spawn edge.
  parent="$(claude_turn "Parent: RUN-SUBAGENT please.")"
  children="$(python3 - "$XDG_DATA_HOME/sessionwatch/sessionwatch.db" "agent:main:claude:$parent" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("\n".join(r[0] for r in c.execute("SELECT session_key FROM sessions WHERE spawned_by = ?", (sys.argv[2],))))
EOF
)"
  check "claude: a sub-agent run is a spawn edge ($children)" bash -c "echo '$children' | grep -q '^agent:main:subagent:claude-'"
  if [ -n "$children" ]; then
    child="$(echo "$children" | head -1)"
    check "claude: the sub-agent's run completed" bash -c "\"$SW\" status '$child' --since 0 --json | grep -q run_completed"
  fi
fi
if [ "$only" = all ] || [ "$only" = codex ]; then
  "$SW" hooks install codex --codex "$CODEX_BIN" --project-dir "$project" >/dev/null || { echo "FAIL codex: hooks install"; failed=1; }
  story codex
fi
[ "$failed" = 0 ] || show_logs
exit "$failed"
