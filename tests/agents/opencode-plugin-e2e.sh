#!/usr/bin/env bash
# The OpenCode plugin end to end, with the REAL OpenCode (opencode-ai 1.18.33, tests/agents/install.sh)
# offline in a loopback-only network namespace against fake_llm.py, `sessionwatch serve`, and the plugin
# written by `sessionwatch hooks install opencode`. The story: an OpenCode manager and an OpenCode worker
# (`opencode run`); the manager watches the worker; a prompt typed into the worker's TUI (through tmux) is
# exactly one human_direct_message at once, also after the file monitor ticks; a `sessions_send` text
# typed there is none; the manager's next model request holds the notice exactly once; a change during
# the manager's tool call reaches it in that tool's output; the gateway down changes nothing for OpenCode.
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/opencode-plugin-e2e.sh
# Exit 77: OpenCode (or tmux) is not installed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agents_dir="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
OPENCODE_BIN="$agents_dir/opencode/node_modules/opencode-linux-x64/bin/opencode"
if [ ! -x "$OPENCODE_BIN" ] || ! command -v tmux >/dev/null 2>&1; then
  echo "SKIPPED: OpenCode ($OPENCODE_BIN) or tmux is not installed (tests/agents/install.sh)"
  exit 77
fi
. "$here/e2e-lib.sh" "$@"

export OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_SHARE=1 \
  OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_CLAUDE_CODE=1 \
  OPENCODE_DISABLE_EXTERNAL_SKILLS=1 TERM=xterm-256color
unset OPENCODE_CONFIG OPENCODE_CONFIG_DIR OPENCODE_DB
mkdir -p "$XDG_CONFIG_HOME/opencode"
cat > "$XDG_CONFIG_HOME/opencode/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "fakellm/fake-model",
  "small_model": "fakellm/fake-model",
  "permission": { "bash": "allow", "edit": "allow" },
  "provider": {
    "fakellm": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Fake LLM (local)",
      "options": { "baseURL": "$LLM/v1", "apiKey": "fake-key-not-secret" },
      "models": { "fake-model": { "name": "Fake Model", "tool_call": true, "limit": { "context": 128000, "output": 4096 } } }
    }
  }
}
EOF
# A change in the worker while the manager's model thinks (RUN-SIDE-EFFECT in fake_llm.py).
export FAKE_LLM_SIDE_EFFECT="\"$SW\" inbound \"\$(cat '$work/worker')\" 'changed during the manager tool call' --channel telegram"
start_services
"$SW" hooks install opencode >"$work/install.out" 2>&1 || { echo "FAIL hooks install: $(cat "$work/install.out")"; exit 1; }
plugin="$XDG_CONFIG_HOME/opencode/plugins/sessionwatch.js"
check "hooks install opencode wrote the plugin" test -f "$plugin"

# The Bun-compiled OpenCode unpacks native libraries into $TMPDIR at every start.
clean_bun_tmp() { find "$TMPDIR" -maxdepth 1 -name '.*.so' -type f -delete 2>/dev/null; return 0; }
oc_run() { # text [session] -> session id (`opencode run`, the prompt on stdin; its output in $OUT)
  local args=(run --format json) out="${OUT:-$work/oc.out}"
  [ -n "${2:-}" ] && args+=(--session "$2")
  (cd "$project" && printf '%s' "$1" | timeout 120 "$OPENCODE_BIN" "${args[@]}" >"$out" 2>>"$work/oc.err") ||
    { echo "opencode failed: $(tail -3 "$work/oc.err")" >&2; clean_bun_tmp; return 1; }
  clean_bun_tmp
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("sessionID"): print(e["sessionID"]); break
else: sys.exit(1)' "$out"
}
requests_with() { # text -> model requests whose body holds text
  python3 - "$llm_log" "$1" <<'EOF'
import sys
print(sum(1 for line in open(sys.argv[1]) if sys.argv[2] in line))
EOF
}
in_last_turn_request() { # text -> occurrences in the newest model request that offered tools (not a title request)
  python3 - "$llm_log" "$1" <<'EOF'
import json, sys
last = None
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    body = e.get("body")
    if isinstance(body, dict) and body.get("tools") and body.get("messages"):
        last = body
print(json.dumps(last["messages"]).count(sys.argv[2]) if last else -1)
EOF
}
in_tool_outputs() { # text -> tool messages (across all requests' newest message) that hold text
  python3 - "$llm_log" "$1" <<'EOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    body = e.get("body")
    msgs = body.get("messages") if isinstance(body, dict) else None
    if msgs and msgs[-1].get("role") == "tool" and sys.argv[2] in json.dumps(msgs[-1]):
        n += 1
print(n)
EOF
}
more_requests_with() { test "$(requests_with "$1")" -gt "$2"; } # text count
# The fake model logs a request when its answer is written: the line may land just after the CLI exits.
last_turn_holds() { test "$(in_last_turn_request "$notice")" = "$1"; }
tool_outputs_hold() { test "$(in_tool_outputs "$notice")" = "$1"; }
tmx() { tmux -S "$work/tmux.sock" "$@"; }
at_exit='tmux -S "$work/tmux.sock" kill-server 2>/dev/null'
wait_for() { # seconds command... -> 0 once the command succeeds
  local s="$1"; shift
  for _ in $(seq 1 $((s * 4))); do "$@" && return 0; sleep 0.25; done
  return 1
}
tui_open() { # session: the worker's TUI in a private tmux server, drawn and settled
  tmx new-session -d -s tui -x 160 -y 45 -c "$project" \
    "env HOME='$HOME' TERM=xterm-256color '$OPENCODE_BIN' --session '$1'; sleep 1" || return 1
  local prev="" cur stable=0
  for i in $(seq 1 60); do
    sleep 0.5
    cur="$(tmx capture-pane -p -t tui 2>/dev/null)" || return 1
    if [ -n "${cur//[[:space:]]/}" ] && [ "$cur" = "$prev" ]; then stable=$((stable + 1)); else stable=0; fi
    prev="$cur"
    [ "$stable" -ge 3 ] && [ "$i" -ge 6 ] && return 0
  done
  return 0
}
tui_type() { # text: typed and sent; waits until the model answered it
  local before
  before="$(requests_with "$1")"
  tmx send-keys -t tui -l "$1"; sleep 0.5
  tmx send-keys -t tui Enter
  wait_for 30 more_requests_with "$1" "$before" || return 1
  sleep 2 # the reply lands in the store
}
tui_close() {
  tmx send-keys -t tui C-c; sleep 0.5; tmx send-keys -t tui C-c
  wait_for 10 bash -c "! tmux -S '$work/tmux.sock' has-session -t tui 2>/dev/null"
  tmx kill-server 2>/dev/null
  clean_bun_tmp
}

# The first turns one after the other: two OpenCode processes starting at once on a fresh home both create
# its database, and one of them can fail doing so (seen: "opencode failed: … params:").
OUT="$work/manager.out" oc_run "I am the manager. Say hello." >"$work/manager.id"
OUT="$work/worker.out" oc_run "I am the worker. Say hello." >"$work/worker.id"
manager="$(cat "$work/manager.id")" worker="$(cat "$work/worker.id")"
[ -n "$manager" ] && [ -n "$worker" ] || { echo "FAIL the first turns: no session"; show_logs; exit 1; }
mkey="agent:main:opencode:$manager" wkey="agent:main:opencode:$worker"
echo "$wkey" > "$work/worker"
check "the plugin adopted both sessions at their first event (same key as catalog continue)" \
  bash -c "\"$SW\" status '$wkey' --since 0 --json | grep '\"adopted\"' >/dev/null && \"$SW\" status '$mkey' --since 0 --json | grep '\"adopted\"' >/dev/null"
check "an \`opencode run\` prompt is not recorded at once (another program's)" test "$(human_events "$wkey")" = 0
sw_json send "$wkey" "take the parser" --watch --as "$mkey" >/dev/null || { echo "FAIL send --watch"; show_logs; exit 1; }
sw_json monitor-tick >/dev/null
sw_json monitor-tick >/dev/null
h0="$(human_events "$wkey")"
notice="Session \\\"${wkey,,}\\\" changed" # session keys are lower case

tui_open "$worker" || { echo "FAIL the worker's TUI did not start"; show_logs; exit 1; }
tui_type "Human: use the new grammar instead." || echo "FAIL the TUI prompt got no answer"
n="$(human_events "$wkey")"
check "a prompt typed into the worker's TUI is one human_direct_message at once ($h0 -> $n)" test "$n" = "$((h0 + 1))"
tui_type "take the parser" || echo "FAIL the second TUI prompt got no answer"
n="$(human_events "$wkey")"
check "a sessions_send text typed into the TUI is not a human turn ($h0 -> $n)" test "$n" = "$((h0 + 1))"
tui_close
sw_json monitor-tick >/dev/null
sw_json monitor-tick >/dev/null
n="$(human_events "$wkey")"
check "the file monitor's ticks add none ($h0 -> $n)" test "$n" = "$((h0 + 1))"

a0="$(acked)"
oc_run "Manager: how is the worker doing?" "$manager" >/dev/null
a1="$(acked)"
check "the manager's next model request holds the notice exactly once" wait_for 5 last_turn_holds 1
check "... delivered and acknowledged by the plugin ($a0 -> $a1)" test "$a1" -gt "$a0"
oc_run "Manager: anything else?" "$manager" >/dev/null
check "the next turn acknowledges nothing new ($a1 -> $(acked))" test "$(acked)" = "$a1"

before="$(in_tool_outputs "$notice")"
a0="$(acked)"
oc_run "Manager: RUN-SIDE-EFFECT RUN-TOOL please run the echo command." "$manager" >/dev/null
check "a change during the manager's tool call reaches it in that tool's output" wait_for 5 tool_outputs_hold "$((before + 1))"
check "... acknowledged once ($a0 -> $(acked))" test "$(acked)" = "$((a0 + 1))"

kill "$gw"; wait "$gw" 2>/dev/null
start="$(date +%s)"
down_turn() { oc_run "Worker: the gateway is down now." "$worker" >/dev/null; }
check "the gateway down changes nothing for OpenCode" down_turn
check "the model answered that turn" grep -q "fake LLM" "$work/oc.out"
echo "that turn took $(( $(date +%s) - start )) s"

"$SW" hooks uninstall opencode >/dev/null
check "hooks uninstall opencode removed the plugin" test ! -e "$plugin"
[ "$failed" = 0 ] || { show_logs; echo "--- oc.err"; tail -20 "$work/oc.err"; }
exit "$failed"
