#!/usr/bin/env bash
# The MCP story driven by the official Python SDK (`mcp` from PyPI) over streamable HTTP and stdio.
#
#   SESSIONWATCH_BIN=path/to/sessionwatch tests/mcp_python/run.sh
#
# Without SESSIONWATCH_BIN it uses target/debug/sessionwatch (built with `cargo build` if missing).
# The virtual environment lives in target/mcp-python-venv (MCP_PYTHON_VENV overrides) and is reused
# while requirements.txt is unchanged. Exits non-zero on failure; the last line is `N passed, M failed`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
venv="${MCP_PYTHON_VENV:-$root/target/mcp-python-venv}"

if [[ -z "${SESSIONWATCH_BIN:-}" ]]; then
    SESSIONWATCH_BIN="$root/target/debug/sessionwatch"
    if [[ ! -x "$SESSIONWATCH_BIN" ]]; then
        (cd "$root" && cargo build --quiet --bin sessionwatch)
    fi
fi
export SESSIONWATCH_BIN

stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    echo "$want" > "$stamp"
fi

exec "$venv/bin/python" "$here/test_mcp.py"
