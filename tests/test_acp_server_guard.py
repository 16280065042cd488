"""Hostile input on ``agentkit acp``'s stdin: every line answered or ignored, never fatal.

The raw ``acp`` 0.12.1 reader exits on a JSON line that is not an object and never answers a
line that is not JSON (the first test shows it on a plain ``acp.run_agent`` agent); the
guard in front of it answers with JSON-RPC errors and the next valid request is served.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import acp
import pytest
from agentkit.acp_server.frames import MAX_DEPTH, Drop, Forward, Reply, judge

from tests._acp_peer import FAKE_ACP_AGENT, serve

INITIALIZE = b'{"jsonrpc":"2.0","id":"next","method":"initialize","params":{"protocolVersion":1}}\n'
DEEP_ARRAY = b"[" * 100_000 + b"]" * 100_000
DEEP_PARAMS = (
    b'{"jsonrpc":"2.0","id":"deep","method":"initialize","params":{"protocolVersion":1,"_meta":'
    + b'{"a":' * (MAX_DEPTH + 5)
    + b"1"
    + b"}" * (MAX_DEPTH + 5)
    + b"}}"
)


def rpc(**fields: object) -> bytes:
    """A JSON-RPC line (``jsonrpc`` added unless given as None)."""
    message = {"jsonrpc": "2.0", **fields}
    return json.dumps({k: v for k, v in message.items() if v is not None}).encode()


PROMPT_META_SESSION = {"sessionId": "conv-a", "prompt": [], "_meta": {"session_id": [1]}}
#: (what, line, expected error code or None when the line is ignored, id it is answered with)
HOSTILE: list[tuple[str, bytes, int | None, str | None]] = [
    ("not JSON", b"hello there", -32700, None),
    ("a JSON array", b"[1, 2]", -32600, None),
    ("an empty batch", b"[]", -32600, None),
    ("a bare string", b'"hi"', -32600, None),
    ("a number", b"3", -32600, None),
    ("null", b"null", -32600, None),
    ("invalid UTF-8", b"\xff\xfe{}", -32700, None),
    ("NaN", b'{"jsonrpc":"2.0","id":"n","method":"initialize","params":{"x":NaN}}', -32700, None),
    ("1e999", b'{"jsonrpc":"2.0","id":"e","method":"x","params":{"x":1e999}}', -32700, None),
    ("arrays nested 100,000 deep", DEEP_ARRAY, -32700, None),
    ("params nested too deep", DEEP_PARAMS, -32700, None),
    ("no jsonrpc member", rpc(jsonrpc=None, id="v", method="initialize"), -32600, "v"),
    ("an object as id", rpc(id={"a": 1}, method="initialize"), -32600, None),
    ("a method that is a number", rpc(id="m", method=5), -32600, "m"),
    ("params that are a string", rpc(id="p", method="session/prompt", params="x"), -32602, "p"),
    ("params of the wrong shape", rpc(id="w", method="session/new", params={"cwd": 5}), -32602,
     "w"),
    ("an unknown method", rpc(id="u", method="nope/nope", params={}), -32601, "u"),
    ("an unstable method", rpc(id="c", method="session/close", params={"sessionId": "a"}), -32601,
     "c"),
    ("_meta replacing sessionId", rpc(id="s", method="session/prompt", params=PROMPT_META_SESSION),
     -32602, "s"),
    ("neither request nor response", rpc(), -32600, None),
    ("a response with a list id", rpc(id=[1], result=1), None, None),
    ("a response with a string error", rpc(id=0, error="x"), None, None),
    ("a response to nothing", rpc(id=12345, result={}), None, None),
    ("an unknown notification", rpc(method="nope/nope"), None, None),
    ("a blank line", b"   ", None, None),
]  # fmt: skip


def test_the_raw_library_exits_on_a_json_array_which_is_why_the_guard_exists() -> None:
    """The measurement behind the guard, on an agent built directly on ``acp.run_agent``."""
    for line, exit_code in ((b"[1, 2]\n", 1), (b'"hi"\n', 1), (b"null\n", 0)):
        done = subprocess.run(
            [sys.executable, str(FAKE_ACP_AGENT)],
            input=line + INITIALIZE,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == exit_code, (line, done.stderr[-500:])
        assert b'"next"' not in done.stdout  # the next request was never served
    done = subprocess.run(
        [sys.executable, str(FAKE_ACP_AGENT)],
        input=b"not json\n" + INITIALIZE,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.count(b"\n") == 1  # served initialize; the bad line got no answer


def test_every_hostile_line_is_answered_or_ignored_and_the_next_request_is_served(
    data_dir: Path, tmp_path: Path
) -> None:
    async def body() -> None:
        async with serve(data_dir, "innovator-001") as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            for what, line, code, request_id in HOSTILE:
                before = len(served.frames)
                await served.raw(line + b"\n")
                listed = await served.conn.list_sessions()  # the next request is served
                assert listed.sessions == [], what
                new = [f for f in served.frames[before:] if "error" in f]
                if code is None:
                    assert new == [], f"{what}: {new}"
                    continue
                assert [(f["id"], f["error"]["code"]) for f in new] == [(request_id, code)], what
                assert served.process.returncode is None, what
            before = len(served.frames)
            await served.raw(b"x" * (9 * 1024 * 1024) + b"\n")  # over the 8 MiB line cap
            await served.conn.list_sessions()
            [answer] = [f for f in served.frames[before:] if "error" in f]
            assert answer["id"] is None and answer["error"]["code"] == -32600
            assert "at most" in answer["error"]["message"]
            sid = await served.new_session(tmp_path)  # and a session still works
            before = len(served.frames)
            smuggled = {"sessionId": sid, "prompt": [], "_meta": {"prompt": {"x": 1}}}
            request = {"jsonrpc": "2.0", "id": "q", "method": "session/prompt", "params": smuggled}
            await served.raw(json.dumps(request).encode() + b"\n")  # _meta replaces prompt
            await served.conn.list_sessions()
            [answer] = [f for f in served.frames[before:] if "error" in f]
            assert answer["id"] == "q" and answer["error"]["code"] == -32602

    run(body())
    stderr = "".join(path.read_text() for path in data_dir.glob("acp-stderr-*.log"))
    assert "answered an inbound line" in stderr  # the log says what happened, on stderr


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_a_last_line_without_a_newline_is_still_served(data_dir: Path) -> None:
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("agentkit")),
            "--data-dir",
            str(data_dir),
            "acp",
            "innovator-001",
        ],
        input=b"[1]\n" + INITIALIZE.rstrip(b"\n"),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    assert [f.get("id") for f in frames] == [None, "next"]
    assert frames[1]["result"]["protocolVersion"] == acp.PROTOCOL_VERSION


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}', Forward),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', Forward),
        (b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"a"}}', Forward),
        (b'{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}', Forward),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no"}}', Forward),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', Reply),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', Reply),
        (b'{"jsonrpc":"2.0","id":"' + b"i" * 300 + b'","method":"x"}', Reply),
        (b'{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"x"}}', Drop),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":true,"message":"x"}}', Drop),
        (b"", Drop),
    ],
)
def test_the_verdict_on_one_line(line: bytes, kind: type) -> None:
    assert isinstance(judge(line), kind)
