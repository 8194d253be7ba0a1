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
agents="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
CLAUDE_BIN="$agents/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
CODEX_BIN="$agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
if [ ! -x "$CLAUDE_BIN" ] || [ ! -x "$CODEX_BIN" ]; then
  echo "SKIPPED: the agent CLIs are not installed in $agents (run tests/agents/install.sh)"
  exit 77
fi
[ "$only" = installed ] && exit 0
SW="${SESSIONWATCH_BIN:-$here/../../target/debug/sessionwatch}"
SW="$(cd "$(dirname "$SW")" && pwd)/$(basename "$SW")"

# Loopback only: re-run inside a private network namespace (the CLIs cannot reach anything else).
if [ -z "${SW_E2E_IN_NETNS:-}" ]; then
  for flag in -n -rn; do
    if unshare $flag sh -c 'ip link set lo up' >/dev/null 2>&1; then
      exec unshare $flag env SW_E2E_IN_NETNS=1 SESSIONWATCH_AGENTS_DIR="$agents" SESSIONWATCH_BIN="$SW" \
        bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
    fi
  done
  echo "FAIL: cannot create a network namespace (unshare -n / -rn)"
  exit 1
fi

work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
export HOME="$work/home" TMPDIR="$work/home/tmp"
mkdir -p "$TMPDIR"
export XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" XDG_STATE_HOME="$HOME/.local/state" \
  XDG_CACHE_HOME="$HOME/.cache"
LLM="http://127.0.0.1:18080"
export HTTPS_PROXY="$LLM" HTTP_PROXY="$LLM" ALL_PROXY="$LLM" https_proxy="$LLM" http_proxy="$LLM" all_proxy="$LLM"
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost" NO_COLOR=1
export FAKE_LLM_API_KEY="fake-key-not-secret" ANTHROPIC_BASE_URL="$LLM" ANTHROPIC_API_KEY="sk-ant-fake-key-not-secret"
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
  DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1
unset OPENAI_API_KEY OPENAI_BASE_URL CODEX_HOME CLAUDE_CONFIG_DIR SESSIONWATCH_URL SESSIONWATCH_TOKEN SESSIONWATCH_HOME
project="$HOME/work/demo"
mkdir -p "$project" "$HOME/.claude" "$HOME/.codex"
(cd "$project" && git init -q -b main && echo "# demo" > README.md && git add README.md &&
  git -c user.name=demo -c user.email=demo@example.invalid commit -q -m demo)
python3 - "$HOME/.claude.json" "$project" "$SW" <<'EOF'
import json, sys
json.dump({"hasCompletedOnboarding": True, "theme": "dark",
           "customApiKeyResponses": {"approved": ["sk-ant-fake-key-not-secret"[-20:]], "rejected": []},
           "projects": {sys.argv[2]: {"hasTrustDialogAccepted": True, "allowedTools": []}},
           "mcpServers": {"sessionwatch": {"type": "stdio", "command": sys.argv[3], "args": ["mcp"]}}},
          open(sys.argv[1], "w"))
EOF
cat > "$HOME/.codex/config.toml" <<EOF
model = "gpt-5.5"
model_provider = "fakellm"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"
[model_providers.fakellm]
name = "Fake LLM (local)"
base_url = "$LLM/v1"
wire_api = "responses"
env_key = "FAKE_LLM_API_KEY"
request_max_retries = 0
stream_max_retries = 0
[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
in_app_updates = false
api_key_model_discovery = false
daemon_auto_start = false
[analytics]
enabled = false
[feedback]
enabled = false
[otel]
exporter = "none"
[projects."$project"]
trust_level = "trusted"
[mcp_servers.sessionwatch]
command = "$SW"
args = ["mcp"]
EOF
export ENABLE_TOOL_SEARCH=false

llm_log="$work/llm.jsonl"
# A human typing into the worker while the manager's model thinks (see RUN-SIDE-EFFECT in fake_llm.py).
export FAKE_LLM_SIDE_EFFECT="\"$SW\" inbound \"\$(cat '$work/worker')\" 'typed into the worker while the manager thinks' --channel telegram"
python3 "$here/fake_llm.py" --port 18080 --log "$llm_log" 2>"$work/llm.err" &
"$SW" serve --listen 127.0.0.1:7420 >"$work/serve.out" 2>"$work/serve.err" &
for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$work/serve.out" || { echo "FAIL: sessionwatch serve did not start"; cat "$work/serve.err"; exit 1; }

failed=0
check() { # name command...
  local name="$1"; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}
sw_json() { "$SW" "$@" --json; }
acked() { # the gateway's count of acknowledged notices
  python3 - "$XDG_DATA_HOME/sessionwatch/token" <<'EOF'
import sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:7420/metrics", headers={"Authorization": "Bearer " + open(sys.argv[1]).read().strip()})
for line in urllib.request.urlopen(req, timeout=5).read().decode().splitlines():
    if line.startswith("sessionwatch_notices_acknowledged_total "):
        print(int(float(line.split()[1])))
EOF
}
human_events() { # key -> number of human_direct_message events
  sw_json status "$1" --since 0 | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v.get("result", v)
r = r.get("details", r)
print(sum(1 for e in r["stateChanges"]["events"] if e["kind"] == "human_direct_message"))'
}
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

claude_turn() { # text [session] -> session id
  local args=(-p --output-format json --allowedTools "Bash(echo *)" mcp__sessionwatch)
  [ -n "${2:-}" ] && args+=(--resume "$2")
  (cd "$project" && timeout 120 "$CLAUDE_BIN" "${args[@]}" -- "$1" </dev/null >"$work/claude.out" 2>>"$work/claude.err") ||
    { echo "claude failed: $(tail -3 "$work/claude.err")" >&2; return 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/claude.out"
}
codex_turn() { # text [thread] -> thread id
  if [ -n "${2:-}" ]; then
    (cd "$project" && timeout 120 "$CODEX_BIN" exec resume --json "$2" -- "$1" </dev/null >"$work/codex.out" 2>>"$work/codex.err")
  else
    (cd "$project" && timeout 120 "$CODEX_BIN" exec --json -- "$1" </dev/null >"$work/codex.out" 2>>"$work/codex.err")
  fi || { echo "codex failed: $(tail -3 "$work/codex.err")" >&2; return 1; }
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("type") == "thread.started":
        print(e["thread_id"]); break' "$work/codex.out"
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
if [ "$failed" != 0 ]; then
  echo "--- serve.err"; tail -20 "$work/serve.err"
  echo "--- claude.err"; tail -20 "$work/claude.err" 2>/dev/null
  echo "--- codex.err"; tail -20 "$work/codex.err" 2>/dev/null
fi
exit "$failed"
