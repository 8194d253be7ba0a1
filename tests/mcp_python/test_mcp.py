"""sessionwatch over MCP, driven by an independent client: the official Python SDK (`mcp` from PyPI).

Starts `sessionwatch serve` (binary from $SESSIONWATCH_BIN) on port 0 in a temporary data dir and tells
the same story over streamable HTTP (`/mcp`, bearer token + `X-Sessionwatch-Session` header) and over
stdio (`sessionwatch mcp --session ... --url ...`): initialize, list the six tools, call each one, a
human turn on a watched child brings exactly one notice in the next tool result and none after it was
acknowledged, bad input gets tool errors (an unknown tool a protocol error) and the server keeps working.

Run with tests/mcp_python/run.sh. Prints one line per test and a final `N passed, M failed`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

# rmcp answers the session DELETE with 202 Accepted; the SDK logs that as a warning. Harmless here.
logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)

MAIN = "agent:main:main"
TOOLS = [
    "session_status",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "sessions_unwatch",
]


def binary() -> str:
    path = os.environ.get("SESSIONWATCH_BIN")
    if not path or not Path(path).is_file():
        raise SystemExit(f"SESSIONWATCH_BIN must name the sessionwatch binary (got {path!r})")
    return path


class Gateway:
    """`sessionwatch serve` on 127.0.0.1:0 with its own data dir and token."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="sw-mcp-py-")
        env = dict(os.environ, SESSIONWATCH_HOME=self.dir.name, SESSIONWATCH_LOG="warn")
        env.pop("SESSIONWATCH_URL", None)
        self.proc = subprocess.Popen(
            [binary(), "serve", "--listen", "127.0.0.1:0", "--data-dir", self.dir.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("listening on "):
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"sessionwatch serve exited with {self.proc.returncode}")
        else:
            raise RuntimeError(f"sessionwatch serve did not start: {line!r}")
        self.url = line.removeprefix("listening on ").strip()
        self.token = (Path(self.dir.name) / "token").read_text().strip()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()

    def post(self, path: str, body: dict | None = None, token: str | None = "default") -> tuple[int, dict]:
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        req.add_header("content-type", "application/json")
        if token == "default":
            token = self.token
        if token:
            req.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def human_turn(self, key: str, text: str) -> None:
        path = f"/v1/sessions/{urllib.parse.quote(key, safe='')}/inbound"
        status, answer = self.post(path, {"text": text, "channel": "telegram", "actor": {"type": "human"}})
        assert status == 200, (status, answer)

    @asynccontextmanager
    async def http_session(self, session: str | None = MAIN, token: str | None = "default"):
        headers = {}
        token = self.token if token == "default" else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if session:
            headers["X-Sessionwatch-Session"] = session
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            async with streamable_http_client(self.url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as s:
                    yield s

    @asynccontextmanager
    async def stdio_session(self, session: str = MAIN):
        params = StdioServerParameters(
            command=binary(),
            args=["mcp", "--session", session, "--url", self.url, "--token", self.token],
            env={"SESSIONWATCH_HOME": self.dir.name, "SESSIONWATCH_LOG": "warn"},
        )
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write):
                async with ClientSession(read, write) as s:
                    yield s


def structured(result) -> dict:
    assert result.structured_content is not None, result
    return result.structured_content


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def notices(result) -> list:
    return structured(result).get("systemEvents", [])


def ok(result):
    assert not result.is_error, f"unexpected tool error: {text(result)}"
    return result


def tool_error(result, kind: str, mentions: str) -> None:
    assert result.is_error, f"expected a tool error: {text(result)}"
    assert structured(result)["error"]["type"] == kind, text(result)
    assert mentions in text(result), (mentions, text(result))


async def story(s: ClientSession, gw: Gateway) -> None:
    init = await s.initialize()
    assert init.server_info.name == "sessionwatch", init.server_info
    assert init.capabilities.tools is not None

    tools = (await s.list_tools()).tools
    assert [t.name for t in tools] == TOOLS, [t.name for t in tools]
    for t in tools:
        assert t.input_schema["type"] == "object", t
        assert t.description, t

    status = ok(await s.call_tool("session_status", {}))
    assert structured(status)["sessionKey"] == MAIN
    assert MAIN in text(status)

    spawn = ok(await s.call_tool("sessions_spawn", {"task": "write the tests", "label": "tests"}))
    child = structured(spawn)["childSessionKey"]
    assert child.startswith("agent:main:subagent:"), child
    assert notices(spawn) == []

    listed = ok(await s.call_tool("sessions_list", {"kinds": ["subagent"]}))
    assert any(row["key"] == child for row in structured(listed)["sessions"])

    send = ok(await s.call_tool("sessions_send", {"sessionKey": child, "message": "also the docs", "watch": True}))
    assert structured(send)["sessionKey"] == child
    assert structured(send)["status"] == "accepted"

    history = ok(await s.call_tool("sessions_history", {"sessionKey": child}))
    assert [m["text"] for m in structured(history)["messages"]] == ["write the tests", "also the docs"]

    # A human steps into the child: exactly one notice in the next result, none in the one after.
    gw.human_turn(child, "stop, use the other branch")
    first = ok(await s.call_tool("sessions_list", {"limit": 5}))
    delivered = notices(first)
    assert len(delivered) == 1, delivered
    notice = delivered[0]["text"]
    assert f'Session "{child}" changed' in notice, notice
    assert "Session notices" in text(first)
    since = int(re.search(r"changesSince (\d+)", notice).group(1))

    reconcile = ok(await s.call_tool("session_status", {"sessionKey": child, "changesSince": since}))
    assert notices(reconcile) == [], "the notice was acknowledged"
    events = structured(reconcile)["stateChanges"]["events"]
    assert [e["kind"] for e in events] == ["human_direct_message"], events
    assert events[0]["summary"] == "human message via telegram"

    unwatch = ok(await s.call_tool("sessions_unwatch", {"sessionKey": child}))
    assert structured(unwatch)["unwatched"] is True
    assert notices(unwatch) == []

    # Bad input.
    try:
        await s.call_tool("sessions_explode", {})
        raise AssertionError("an unknown tool must be a protocol error")
    except MCPError as e:
        assert "unknown tool" in e.message, e.message
    tool_error(await s.call_tool("session_status", {"changesSince": "twelve"}), "invalid_argument", "changesSince")
    tool_error(await s.call_tool("sessions_list", {"limit": 0}), "invalid_argument", "limit")
    tool_error(await s.call_tool("sessions_send", {"sessionKey": child}), "invalid_argument", "message")
    # An argument the tool does not know is ignored and named (an LLM's call often adds one, and OpenClaw
    # ignores it); a known argument of the wrong type is still refused.
    ignored = ok(await s.call_tool("session_status", {"sessionKey": child, "bogus": 1}))
    assert structured(ignored)["ignoredArgs"] == ["bogus"], structured(ignored)
    tool_error(await s.call_tool("sessions_spawn", {"task": 5, "bogus": 1}), "invalid_argument", "task")
    tool_error(
        await s.call_tool("sessions_history", {"sessionKey": "agent:main:nowhere"}),
        "not_found",
        "agent:main:nowhere",
    )
    still = ok(await s.call_tool("session_status", {"sessionKey": child}))
    assert structured(still)["sessionKey"] == child


async def test_streamable_http_story(gw: Gateway) -> None:
    async with gw.http_session() as s:
        await story(s, gw)


async def test_stdio_story(gw: Gateway) -> None:
    async with gw.stdio_session() as s:
        await story(s, gw)


async def test_http_caller_from_header(gw: Gateway) -> None:
    async with gw.http_session("agent:ops:worker") as s:
        await s.initialize()
        status = ok(await s.call_tool("session_status", {}))
        assert structured(status)["sessionKey"] == "agent:ops:worker"
    async with gw.http_session(None) as s:
        await s.initialize()
        status = ok(await s.call_tool("session_status", {}))
        assert structured(status)["sessionKey"] == MAIN


async def test_http_requires_the_token(gw: Gateway) -> None:
    failed = False
    try:
        with anyio.fail_after(20):
            async with gw.http_session(token="wrong") as s:
                await s.initialize()
    except BaseException as e:  # the SDK reports the 401 as an error (possibly in an exception group)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        failed = True
    assert failed, "a wrong token must not initialize"
    # The gateway keeps serving.
    status, answer = gw.post("/tools/invoke", {"tool": "sessions_list", "args": {}})
    assert status == 200, answer


TESTS = [
    test_streamable_http_story,
    test_stdio_story,
    test_http_caller_from_header,
    test_http_requires_the_token,
]


def main() -> int:
    binary()
    passed = failed = 0
    for test in TESTS:
        gw = None
        started = time.monotonic()
        try:
            gw = Gateway()
            anyio.run(test, gw)
            passed += 1
            print(f"PASS {test.__name__} ({time.monotonic() - started:.2f}s)", flush=True)
        except BaseException:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            print(f"FAIL {test.__name__}", flush=True)
            traceback.print_exc()
        finally:
            if gw is not None:
                gw.close()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
