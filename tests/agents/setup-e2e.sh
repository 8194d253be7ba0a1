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
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/e2e-lib.sh" "$@"
# No user service manager, no SESSIONWATCH_* variable; the CLIs on PATH, where setup finds them.
unset XDG_RUNTIME_DIR DBUS_SESSION_BUS_ADDRESS
for v in $(env | sed -n 's/^\(SESSIONWATCH_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export PATH="$(dirname "$CLAUDE_BIN"):$(dirname "$CODEX_BIN"):$PATH"
CLAUDE_TOOLS=() # setup's permission rule allows our MCP tools
rm -f "$HOME/.codex/hooks.json"
# The user's own settings, in their own format (4-space JSON, TOML with comments): setup merges into them.
python3 - "$HOME/.claude.json" "$project" <<'EOF2'
import json, sys
json.dump({"hasCompletedOnboarding": True, "theme": "dark",
           "customApiKeyResponses": {"approved": ["sk-ant-fake-key-not-secret"[-20:]], "rejected": []},
           "projects": {sys.argv[2]: {"hasTrustDialogAccepted": True, "allowedTools": []}}},
          open(sys.argv[1], "w"), indent=4)
EOF2
# The harness's Codex config as a user would keep it: with comments, without our MCP server.
python3 - "$HOME/.codex/config.toml" <<'EOF2'
import sys
text = open(sys.argv[1]).read().split("[mcp_servers.sessionwatch]")[0]
text = text.replace('model = "gpt-5.5"', 'model = "gpt-5.5"   # the fake model\'s name', 1)
open(sys.argv[1], "w").write("# my Codex settings\n" + text)
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

start_fake_model

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

gw_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
start_gateway
requests_with() { python3 -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if sys.argv[2] in l))' "$llm_log" "$1"; }

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
