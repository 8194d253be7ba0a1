# shellcheck shell=bash
# The set-up the real-CLI end-to-end tests share (hooks-e2e.sh, burst-e2e.sh, workspace-e2e.sh). Source it first thing,
# with the script's arguments:   . "$here/e2e-lib.sh" "$@"
#
# On sourcing it: exits 77 when the CLIs are not installed (and 0 for the argument `installed`); re-runs
# the calling script inside a loopback-only network namespace; makes a fresh HOME under $work (removed at
# exit unless KEEP=1) holding a git project ($project) and the Claude Code / Codex configs, both pointed at
# the fake model and at `sessionwatch mcp`. The script then sets what the fake model needs
# (FAKE_LLM_SIDE_EFFECT) and calls start_services: the fake model (request log $llm_log) and
# `sessionwatch serve`.
set -uo pipefail
e2e_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
agents="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
CLAUDE_BIN="$agents/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
CODEX_BIN="$agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
if [ ! -x "$CLAUDE_BIN" ] || [ ! -x "$CODEX_BIN" ]; then
  echo "SKIPPED: the agent CLIs are not installed in $agents (run tests/agents/install.sh)"
  exit 77
fi
[ "${1:-}" = installed ] && exit 0
SW="${SESSIONWATCH_BIN:-$e2e_lib_dir/../../target/debug/sessionwatch}"
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
at_exit="" # a command a script adds to the clean-up (burst-e2e.sh: its tmux server)
trap 'eval "$at_exit"; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
[ -z "${KEEP:-}" ] || echo "work dir (kept): $work"
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
# The notice / nux tables keep the Codex TUI from opening on a model-migration prompt.
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
[notice.model_migrations]
"gpt-5.5" = "gpt-6-sol"
[tui.model_availability_nux]
"gpt-6.1-sol" = 1
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

gw_port=7420
CLAUDE_TOOLS=(mcp__sessionwatch)
start_fake_model() {
  python3 "$e2e_lib_dir/fake_llm.py" --port 18080 --log "$llm_log" 2>"$work/llm.err" &
}
start_gateway() { # `sessionwatch serve` on $gw_port (its pid: $gw); exits 1 when it does not start
  : >"$work/serve.out"
  "$SW" serve --listen "127.0.0.1:$gw_port" >"$work/serve.out" 2>>"$work/serve.err" &
  gw=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "listening on" "$work/serve.out" || { echo "FAIL: sessionwatch serve did not start"; cat "$work/serve.err"; exit 1; }
}
start_services() { # the fake model and the gateway
  start_fake_model
  start_gateway
}

failed=0
tui_settled() { # name -> true once tmux session <name> has drawn its screen and kept it for 1.5 s (at most 30 s; needs tmx)
  local prev="" cur stable=0 i
  for i in $(seq 1 60); do
    sleep 0.5
    cur="$(tmx capture-pane -p -t "$1" 2>/dev/null)" || return 1
    if [ -n "${cur//[[:space:]]/}" ] && [ "$cur" = "$prev" ]; then stable=$((stable + 1)); else stable=0; fi
    prev="$cur"
    [ "$stable" -ge 3 ] && [ "$i" -ge 4 ] && return 0
  done
  return 1
}
check() { # name command...
  local name="$1"; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}
sw_json() { "$SW" "$@" --json; }
metric() { # name -> the gateway's value of that /metrics counter
  python3 - "$XDG_DATA_HOME/sessionwatch/token" "$1" "$gw_port" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[3]}/metrics", headers={"Authorization": "Bearer " + open(sys.argv[1]).read().strip()})
for line in urllib.request.urlopen(req, timeout=5).read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(int(float(line.split()[1])))
EOF
}
acked() { metric sessionwatch_notices_acknowledged_total; } # the gateway's count of acknowledged notices
human_events() { # key -> number of human_direct_message events
  sw_json status "$1" --since 0 | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v.get("result", v)
r = r.get("details", r)
print(sum(1 for e in r["stateChanges"]["events"] if e["kind"] == "human_direct_message"))'
}

claude_turn() { # text [session] -> session id (print mode, -p)
  local args=(-p --output-format json --allowedTools "Bash(echo *)" "${CLAUDE_TOOLS[@]}")
  [ -n "${2:-}" ] && args+=(--resume "$2")
  (cd "$project" && timeout 120 "$CLAUDE_BIN" "${args[@]}" -- "$1" </dev/null >"$work/claude.out" 2>>"$work/claude.err") ||
    { echo "claude failed: $(tail -3 "$work/claude.err")" >&2; return 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/claude.out"
}
codex_turn() { # text [thread] -> thread id (print mode, exec)
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

show_logs() { # the tails that explain a failure
  echo "--- serve.err"; tail -20 "$work/serve.err"
  echo "--- claude.err"; tail -20 "$work/claude.err" 2>/dev/null
  echo "--- codex.err"; tail -20 "$work/codex.err" 2>/dev/null
}

# Reading a turn in the request log (burst-e2e.sh, workspace-e2e.sh).
# from session prompt key -> "requests notices stop-blocks": the model requests of the turn that began after
# line <from> of the log (the CLI session's own requests whose body holds the turn's prompt: not Codex's
# title request, a thread of its own), the changesSince of every notice about <key> in the last of them
# (comma-separated, in order; "-" for none), and the Stop blocks in it.
turn_in_log() {
  python3 - "$llm_log" "$1" "$2" "$3" "$4" <<'EOF'
import json, re, sys
log, start, session, prompt, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
notice = re.compile(re.escape('Session "%s" changed (other actor).' % key) + r'.*?changesSince (\d+)\.')
def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from strings(x)
turn = []
for i, line in enumerate(open(log)):
    if i < start:
        continue
    e = json.loads(line)
    body = e.get("body")
    headers = {k.lower(): v for k, v in (e.get("headers") or {}).items()}
    if headers.get("x-claude-code-session-id", headers.get("session-id")) != session:
        continue
    if e.get("method") != "POST" or not isinstance(body, dict) or not ("messages" in body or "input" in body):
        continue
    texts = list(strings(body.get("messages") or body.get("input"))) + list(strings(body.get("system") or ""))
    if any(prompt in t for t in texts):
        turn.append(texts)
if not turn:
    print("0 - 0")
    sys.exit()
last = turn[-1]
since = [m for t in last for m in notice.findall(t)]
stops = sum(t.count("sessionwatch: before you finish") for t in last)
print(len(turn), ",".join(since) or "-", stops)
EOF
}
