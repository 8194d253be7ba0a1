#!/usr/bin/env bash
# One notice per burst, end to end with the REAL Claude Code and Codex CLIs, offline (the set-up is
# e2e-lib.sh's: a loopback-only network namespace, the fake model fake_llm.py, `sessionwatch serve`, the hooks
# installed by `sessionwatch hooks install`).
#
#   SESSIONWATCH_BIN=target/debug/sessionwatch tests/agents/burst-e2e.sh [claude-manager|codex-manager|all]
#   tests/agents/burst-e2e.sh installed    # only answers whether the CLIs are there (0, or 77)
#
# Exit 0: every check passed; 1: a check failed; 77: the CLIs or tmux are not installed (skipped).
# The story per direction (a manager in one CLI watching a worker in the other):
#   round 1: one prompt typed into the worker (print mode); the manager's next turn, resumed in print mode;
#   a quiet turn of the manager (no change since its last drain);
#   round 2: two prompts typed into the worker's TUI (tmux); the manager's next turn in print mode;
#   round 3: the manager's TUI is open (tmux) while three prompts go into the worker (print mode); then a
#   prompt typed into the manager's TUI, and a quiet one after it.
# Each manager turn is read in the fake model's request log: the turn's last request (which re-sends the
# whole conversation) must hold the notices of the earlier turns plus exactly one new one, whose
# `changesSince` is the worker's state version before the burst (quiet turns: no new one), and no Stop
# block ("sessionwatch: before you finish"): nothing changes while the manager works. /metrics: one
# acknowledged notice per burst, none reopened.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
only="${1:-all}"
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed (apt-get install tmux)"; exit 77; }
. "$here/e2e-lib.sh" "$@"
start_services

TMUX_SOCK="$work/tmux.sock"
tmx() { tmux -S "$TMUX_SOCK" "$@"; }
at_exit="tmx kill-server 2>/dev/null" # no TUI outlives a failed run
log_lines() { wc -l <"$llm_log" 2>/dev/null || echo 0; }

state_version() { # key -> its state version
  sw_json status "$1" | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v.get("result", v)
r = r.get("details", r)
print(r["stateVersion"])'
}

# --- the TUIs, through tmux

tui_open() { # name cli session: the CLI's TUI resumed on session, in tmux session <name>, drawn and settled
  local name="$1" cli="$2" session="$3" cmd
  case "$cli" in
    claude) cmd="$(printf '%q --resume %q' "$CLAUDE_BIN" "$session")" ;;
    codex) cmd="$(printf '%q resume %q' "$CODEX_BIN" "$session")" ;;
  esac
  tmx new-session -d -s "$name" -x 200 -y 50 -c "$project" "env TERM=xterm-256color $cmd; sleep 600" || return 1
  tui_settled "$name" && return 0
  echo "tui_open $name: the TUI did not start or settle" >&2
  return 1
}
tui_close() { # name
  tmx send-keys -t "$1" C-c; sleep 0.5; tmx send-keys -t "$1" C-c; sleep 0.5
  tmx capture-pane -p -t "$1" -S -200 >"$work/$1.screen" 2>/dev/null
  tmx kill-session -t "$1" 2>/dev/null
  return 0
}
tui_type() { # name text: types text into the TUI and waits until the model was asked and the turn settled
  local name="$1" text="$2" from
  from="$(log_lines)"
  tmx send-keys -t "$name" -l "$text"; sleep 0.7
  tmx send-keys -t "$name" Enter
  for _ in $(seq 1 120); do
    sleep 0.25
    tail -n +"$((from + 1))" "$llm_log" | grep -qF "$text" && { wait_quiet; return 0; }
  done
  tmx capture-pane -p -t "$name" >"$work/$name.screen"
  echo "tui_type $name: no model request with \"$text\" (screen in $work/$name.screen)" >&2
  return 1
}
wait_quiet() { # until the model has had no request for 2 s (a Stop block would ask it again at once)
  local size prev=-1 same=0
  for _ in $(seq 1 100); do
    size="$(stat -c %s "$llm_log")"
    if [ "$size" = "$prev" ]; then same=$((same + 1)); else same=0; fi
    prev="$size"
    [ "$same" -ge 8 ] && return 0
    sleep 0.25
  done
}

# --- the story

direction() { # manager-cli worker-cli
  local mcli="$1" wcli="$2" d="$1 manager, $2 worker" manager worker mkey wkey
  manager="$("${mcli}_turn" "I am the manager. Say hello.")" || { echo "FAIL $d: manager session"; failed=1; return; }
  worker="$("${wcli}_turn" "I am the worker. Say hello.")" || { echo "FAIL $d: worker session"; failed=1; return; }
  mkey="agent:main:$mcli:$manager" wkey="agent:main:$wcli:$worker"
  sw_json send "$wkey" "take the parser" --watch --as "$mkey" >/dev/null || { echo "FAIL $d: watch"; failed=1; return; }
  # The notices already in the manager's conversation (each later turn re-sends them).
  seen=""

  # manager_turn how label prompt expected: one manager turn (how: print | tui), then its checks; expected
  # is the changesSince of the one new notice, or "" for a quiet turn.
  manager_turn() {
    local how="$1" label="$2" prompt="$3" expected="$4" from a0 a1 n since stops want
    from="$(log_lines)" a0="$(acked)"
    if [ "$how" = tui ]; then
      tui_type manager "$prompt" || { echo "FAIL $d: $label: the manager's TUI turn"; failed=1; return; }
    else
      "${mcli}_turn" "$prompt" "$manager" >/dev/null || { echo "FAIL $d: $label: the manager's turn"; failed=1; return; }
    fi
    a1="$(acked)"
    read -r n since stops <<<"$(turn_in_log "$from" "$manager" "$prompt" "$wkey")"
    [ "$since" = - ] && since=""
    want="$seen${expected:+${seen:+,}$expected}"
    if [ -n "$expected" ]; then
      check "$d: $label: the turn's last model request holds one new notice, changesSince $expected (all: ${since:-none}; want ${want})" \
        test "$since" = "$want"
      check "$d: $label: one notice acknowledged ($a0 -> $a1)" test "$a1" = "$((a0 + 1))"
    else
      check "$d: $label: quiet: no new notice in the turn's last model request (all: ${since:-none}; want ${want:-none})" \
        test "$since" = "$want"
      check "$d: $label: quiet: nothing acknowledged ($a0 -> $a1)" test "$a1" = "$a0"
    fi
    check "$d: $label: Stop did not block ($stops blocks, $n model requests in the turn)" test "$stops" = 0 -a "$n" -ge 1
    seen="$since"
  }
  burst() { # how count label: <count> human prompts into the worker (how: print | tui)
    local how="$1" count="$2" label="$3" h0 h1 a0 a1 k
    h0="$(human_events "$wkey")" a0="$(acked)"
    [ "$how" = tui ] && { tui_open worker "$wcli" "$worker" || { echo "FAIL $d: $label: the worker's TUI"; failed=1; return; }; }
    for k in $(seq 1 "$count"); do
      if [ "$how" = tui ]; then
        tui_type worker "Human, $label, prompt $k of $count: use the new grammar." || { failed=1; echo "FAIL $d: $label: typing"; }
      else
        "${wcli}_turn" "Human, $label, prompt $k of $count: use the new grammar." "$worker" >/dev/null || { failed=1; echo "FAIL $d: $label: prompt $k"; }
      fi
    done
    [ "$how" = tui ] && tui_close worker
    h1="$(human_events "$wkey")" a1="$(acked)"
    check "$d: $label: $count prompts into the worker ($how) are $count human_direct_message ($h0 -> $h1)" test "$h1" = "$((h0 + count))"
    check "$d: $label: nothing acknowledged while the manager is idle ($a0 -> $a1)" test "$a1" = "$a0"
  }

  local v
  v="$(state_version "$wkey")"
  burst print 1 "burst 1"
  manager_turn print "burst 1, the manager resumed (print)" "Manager, after burst 1: how is the worker doing?" "$v"
  manager_turn print "quiet turn (print)" "Manager, quiet turn: anything new?" ""

  v="$(state_version "$wkey")"
  burst tui 2 "burst 2"
  manager_turn print "burst 2, the manager resumed (print)" "Manager, after burst 2: how is the worker doing?" "$v"

  tui_open manager "$mcli" "$manager" || { echo "FAIL $d: the manager's TUI"; failed=1; return; }
  v="$(state_version "$wkey")"
  burst print 3 "burst 3"
  manager_turn tui "burst 3, the manager's TUI open" "Manager, after burst 3: how is the worker doing?" "$v"
  manager_turn tui "quiet turn (TUI)" "Manager, quiet turn in the TUI: anything new?" ""
  tui_close manager
}

"$SW" hooks install claude >/dev/null || { echo "FAIL: hooks install claude"; failed=1; }
# Codex runs only trusted hooks, and skips the others silently.
check "hooks install codex: the hooks are trusted" \
  bash -c "\"$SW\" hooks install codex --codex '$CODEX_BIN' --project-dir '$project' | grep -q 'codex: trusted'"
r0="$(metric sessionwatch_notices_reopened_total)"
if [ "$only" = all ] || [ "$only" = claude-manager ]; then direction claude codex; fi
if [ "$only" = all ] || [ "$only" = codex-manager ]; then direction codex claude; fi
r1="$(metric sessionwatch_notices_reopened_total)"
check "no notice was reopened ($r0 -> $r1)" test "$r1" = 0
[ "$failed" = 0 ] || show_logs
exit "$failed"
