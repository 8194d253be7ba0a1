#!/usr/bin/env bash
# From a fresh HOME to a watching fleet with `sessionwatch setup` (issue 34), with the REAL Claude Code and
# Codex CLIs on PATH, offline (the harness of hooks-e2e.sh: a loopback-only network namespace, the fake
# model fake_llm.py). No SESSIONWATCH_* variable anywhere: the clients find the gateway by its runtime file.
#
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/setup-e2e.sh
#
# The story: `setup --yes` (no systemd user manager here: it says how to start the gateway); a gateway on a
# random port; a Claude and a Codex manager watch a worker of their CLI, a human types into the worker, the
# manager's next turn gets the notice; `doctor` exits 0; the gateway stops -> `doctor` exits 1 naming it and
# the next Claude turn shows the user one line; `setup --undo` gives every file its bytes back.
#
# The CLIs come from tests/agents/install.sh (SESSIONWATCH_AGENTS_DIR, default ~/.cache/sessionwatch/agents).
# Exit 0: every check passed; 1: a check failed; 77: the CLIs are not installed (skipped).
# The story per CLI: a manager and a worker session; the manager watches the worker; a human types into
# the worker (exactly one human_direct_message, also after the file monitor ticks); the manager's next
# prompt carries the notice (in its hook output and in the model request it causes); a change while the
# manager's model is thinking makes Stop block once, not twice; a Claude sub-agent becomes a spawn edge.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agents="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
CLAUDE_BIN="$agents/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
CODEX_BIN="$agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
if [ ! -x "$CLAUDE_BIN" ] || [ ! -x "$CODEX_BIN" ]; then
  echo "SKIPPED: the agent CLIs are not installed in $agents (run tests/agents/install.sh)"
  exit 77
fi
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
unset OPENAI_API_KEY OPENAI_BASE_URL CODEX_HOME CLAUDE_CONFIG_DIR XDG_RUNTIME_DIR DBUS_SESSION_BUS_ADDRESS
for v in $(env | sed -n 's/^\(SESSIONWATCH_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export PATH="$(dirname "$CLAUDE_BIN"):$(dirname "$CODEX_BIN"):$PATH"
project="$HOME/work/demo"
mkdir -p "$project" "$HOME/.codex"
(cd "$project" && git init -q -b main && echo "# demo" > README.md && git add README.md &&
  git -c user.name=demo -c user.email=demo@example.invalid commit -q -m demo)
# The user's own settings, in their own format (4-space JSON, TOML with comments): setup merges into them.
python3 - "$HOME/.claude.json" "$project" <<'EOF2'
import json, sys
json.dump({"hasCompletedOnboarding": True, "theme": "dark",
           "customApiKeyResponses": {"approved": ["sk-ant-fake-key-not-secret"[-20:]], "rejected": []},
           "projects": {sys.argv[2]: {"hasTrustDialogAccepted": True, "allowedTools": []}}},
          open(sys.argv[1], "w"), indent=4)
EOF2
cat > "$HOME/.codex/config.toml" <<EOF2
# my Codex settings
model = "gpt-5.5"   # the fake model's name
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
EOF2
export ENABLE_TOOL_SEARCH=false
data="$XDG_DATA_HOME/sessionwatch"
# The files setup may touch, as they were (a missing file is recorded as missing).
touched=("$HOME/.claude.json" "$HOME/.claude/settings.json" "$HOME/.codex/config.toml" "$HOME/.codex/hooks.json"
  "$XDG_CONFIG_HOME/systemd/user/sessionwatch.service")
snapshot() { # dir
  mkdir -p "$1"
  for f in "${touched[@]}"; do
    if [ -e "$f" ]; then cp -p "$f" "$1/$(echo "$f" | tr / _)"; else : > "$1/$(echo "$f" | tr / _).missing"; fi
  done
}
same_as() { # dir [file to skip] -> every touched file has its bytes from the snapshot
  local f s ok=0
  for f in "${touched[@]}"; do
    [ "$f" = "${2:-}" ] && continue
    s="$1/$(echo "$f" | tr / _)"
    if [ -e "$s.missing" ]; then [ ! -e "$f" ] || { echo "  $f exists (it did not)"; ok=1; }
    else cmp -s "$s" "$f" || { echo "  $f differs"; diff "$s" "$f" | head -10; ok=1; }; fi
  done
  return $ok
}

failed=0
check() { # name command...
  local name="$1"; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}

llm_log="$work/llm.jsonl"
python3 "$here/fake_llm.py" --port 18080 --log "$llm_log" 2>"$work/llm.err" &

snapshot "$work/orig"
"$SW" setup --yes >"$work/setup1.out" 2>&1
check "setup --yes succeeds" test $? = 0
check "setup says how to start the gateway (no user manager here)" grep -q "serve\` yourself" "$work/setup1.out"
"$SW" setup --yes >"$work/setup2.out" 2>&1
check "a second setup changes nothing and says so" grep -q "nothing to change" "$work/setup2.out"
check "setup recorded what it added, 0600" test "$(stat -c %a "$data/setup.json")" = 600
"$SW" setup --undo >"$work/undo1.out" 2>&1
check "setup --undo right after setup: every file has its bytes back" same_as "$work/orig"
"$SW" setup --yes >"$work/setup3.out" 2>&1
check "setup again" test $? = 0
check "the service unit runs this binary" grep -q "ExecStart=\"$SW\" serve" "$XDG_CONFIG_HOME/systemd/user/sessionwatch.service"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
start_gateway() {
  "$SW" serve --listen "127.0.0.1:$port" >"$work/serve.out" 2>>"$work/serve.err" &
  gw=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "listening on" "$work/serve.out" || { echo "FAIL: sessionwatch serve did not start"; cat "$work/serve.err"; exit 1; }
}
start_gateway
acked() {
  python3 - "$data/token" "$port" <<'EOF2'
import sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[2]}/metrics", headers={"Authorization": "Bearer " + open(sys.argv[1]).read().strip()})
for line in urllib.request.urlopen(req, timeout=5).read().decode().splitlines():
    if line.startswith("sessionwatch_notices_acknowledged_total "):
        print(int(float(line.split()[1])))
EOF2
}
requests_with() { python3 -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if sys.argv[2] in l))' "$llm_log" "$1"; }

claude_turn() { # text [session] -> session id
  local args=(-p --output-format json --allowedTools "Bash(echo *)")
  [ -n "${2:-}" ] && args+=(--resume "$2")
  (cd "$project" && timeout 120 claude "${args[@]}" -- "$1" </dev/null >"$work/claude.out" 2>>"$work/claude.err") ||
    { echo "claude failed: $(tail -3 "$work/claude.err")" >&2; return 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/claude.out"
}
codex_turn() { # text [thread] -> thread id
  if [ -n "${2:-}" ]; then
    (cd "$project" && timeout 120 codex exec resume --json "$2" -- "$1" </dev/null >"$work/codex.out" 2>>"$work/codex.err")
  else
    (cd "$project" && timeout 120 codex exec --json -- "$1" </dev/null >"$work/codex.out" 2>>"$work/codex.err")
  fi || { echo "codex failed: $(tail -3 "$work/codex.err")" >&2; return 1; }
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("type") == "thread.started":
        print(e["thread_id"]); break' "$work/codex.out"
}

story() { # cli: adopted, recorded, notified, with no SESSIONWATCH_* variable set
  local cli="$1" turn="${1}_turn" manager worker mkey wkey before after a0 a1
  manager="$($turn "I am the manager. Say hello.")" || { echo "FAIL $cli: manager session"; failed=1; return; }
  worker="$($turn "I am the worker. Say hello.")" || { echo "FAIL $cli: worker session"; failed=1; return; }
  mkey="agent:main:$cli:$manager" wkey="agent:main:$cli:$worker"
  check "$cli: a real turn is adopted" bash -c "\"$SW\" status '$wkey' --since 0 --json | grep -q '\"adopted\"'"
  "$SW" send "$wkey" "take the parser" --watch --as "$mkey" --json >/dev/null
  $turn "A human types into the worker: use the new grammar." "$worker" >/dev/null
  check "$cli: the human's prompt is recorded" bash -c "\"$SW\" status '$wkey' --since 0 --json | grep -q human_direct_message"
  before="$(requests_with "Session \\\"$wkey\\\" changed (other actor)")"
  a0="$(acked)"
  $turn "Manager here: how is the worker doing?" "$manager" >/dev/null
  after="$(requests_with "Session \\\"$wkey\\\" changed (other actor)")"
  a1="$(acked)"
  check "$cli: the manager's next turn gets the notice ($before -> $after requests, $a0 -> $a1 acknowledged)" \
    test "$after" -gt "$before" -a "$a1" = "$((a0 + 1))"
}
story claude
story codex

"$SW" doctor >"$work/doctor1.out" 2>&1
check "doctor exits 0 with the gateway up" test $? = 0
check "doctor says where the URL came from (the runtime file)" grep -q "runtime file" "$work/doctor1.out"
kill "$gw"; wait "$gw" 2>/dev/null
"$SW" doctor >"$work/doctor2.out" 2>&1
check "doctor exits 1 with the gateway stopped" test $? = 1
check "... naming it" grep -q "FAIL  gateway reachable .*unreachable" "$work/doctor2.out"
(cd "$project" && timeout 120 claude -p --output-format stream-json --verbose --allowedTools "Bash(echo *)" -- \
  "Say hello while the gateway is down." </dev/null >"$work/claude-down.out" 2>>"$work/claude.err")
n="$(grep -o 'sessionwatch: cannot reach the gateway' "$work/claude-down.out" | wc -l)"
check "the next Claude turn shows the user one line saying the gateway is unreachable ($n)" test "$n" -ge 1
n="$(python3 - "$work/claude-down.out" <<'EOF2'
import json, sys
n = 0
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("subtype") == "hook_response" and "systemMessage" in (e.get("stdout") or ""):
        n += 1
print(n)
EOF2
)"
check "... one line, not one per hook ($n hooks answered with it)" test "$n" = 1

"$SW" setup --undo >"$work/undo2.out" 2>&1
check "setup --undo succeeds" test $? = 0
# Claude writes its own state into ~/.claude.json on every run: only our entry may go, the rest stays.
check "setup --undo: every other file has its bytes back" same_as "$work/orig" "$HOME/.claude.json"
check "setup --undo: ~/.claude.json has no sessionwatch server left" \
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit("sessionwatch" in d.get("mcpServers", {}))' "$HOME/.claude.json"
check "setup --undo: the manifest is gone" test ! -e "$data/setup.json"
if [ "$failed" != 0 ]; then
  for f in setup1 setup3 undo2 doctor1 doctor2; do echo "--- $f.out"; cat "$work/$f.out"; done
  echo "--- serve.err"; tail -20 "$work/serve.err"
  echo "--- claude.err"; tail -20 "$work/claude.err" 2>/dev/null
  echo "--- claude-down.out"; tail -5 "$work/claude-down.out" 2>/dev/null
  echo "--- codex.err"; tail -20 "$work/codex.err" 2>/dev/null
fi
exit "$failed"
