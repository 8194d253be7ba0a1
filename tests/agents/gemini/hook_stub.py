#!/usr/bin/env python3
"""Stands in for `sessionwatch hook <event>` while the Gemini fixtures are made.

    hook_stub.py <event>      (stdin: the hook's JSON)

Appends {"event", "stdin"} to $SW_STUB_LOG. For BeforeAgent and AfterTool it answers like
`sessionwatch hook` with a pending notice, so the chat files hold the `<hook_context>` parts the real
hooks write; nothing when the prompt contains NO-NOTICE (no notice pending). Always exits 0.
"""
import json
import os
import sys


def main():
    event = sys.argv[1] if len(sys.argv) > 1 else "unknown"
    raw = sys.stdin.read()
    data = json.loads(raw) if raw.strip() else {}
    with open(os.environ["SW_STUB_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": event, "stdin": data}) + "\n")
    if event in ("BeforeAgent", "AfterTool") and "NO-NOTICE" not in str(data.get("prompt", "")):
        notice = ('SW-NOTICE (%s): Session "agent:main:demo" changed (other actor). '
                  'Reconcile before acting: session_status sessionKey "agent:main:demo" changesSince 3.' % event)
        print(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": notice}}))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        pass
    sys.exit(0)
