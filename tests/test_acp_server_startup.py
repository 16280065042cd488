"""``agentkit acp`` as a good citizen (issue 28): a startup error is the answer to the
client's ``initialize`` (then exit 2), a failing ``session/new``/``session/load`` is an error
response naming its cause, titles come from the user's own words, and ``--no-replay``
(or ``acp.replay: false``) loads a conversation without replaying it.

Real subprocesses driven by the ``agent-client-protocol`` client (:mod:`tests._acp_peer`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import AgentMessageChunk, UserMessageChunk
from agentkit.titles import conversation_title

from tests._acp_peer import HANG_GUARD, RecordingClient, Served, serve

PREAMBLE = (
    "System note: When creating or editing Jupyter notebooks (.ipynb), use the Jupyter "
    "notebook MCP tools (for example insert_cell, edit_cell, delete_cell, read_notebook). Do "
    "not write or edit .ipynb files directly with generic file-write/edit tools."
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def script(tmp_path: Path, replies: dict[str, Any]) -> str:
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    return f"scripted:{path}"


async def refused_at_initialize(served: Served) -> acp.RequestError:
    with pytest.raises(acp.RequestError) as error:
        await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    code = await asyncio.wait_for(served.process.wait(), HANG_GUARD)
    assert code == 2, served.stderr.read_text()
    return error.value


@pytest.mark.parametrize(
    ("agent_id", "args", "cause"),
    [
        ("nobody", (), "no agent 'nobody'"),
        ("innovator-001", ("--model", "nonsense:x"), "unknown backend 'nonsense'"),
        ("innovator-001", ("--model", "llama:/nowhere/model.gguf"), "no such GGUF file"),
        ("broken", (), "modle"),
    ],
)
def test_a_startup_error_is_the_answer_to_initialize(
    data_dir: Path, agent_id: str, args: tuple[str, ...], cause: str
) -> None:
    broken = data_dir / "agents" / "broken"
    (broken / "workspace").mkdir(parents=True)
    (broken / "config.json").write_text('{"modle": "llama"}', encoding="utf-8")

    async def body() -> None:
        async with serve(data_dir, agent_id, *args, check_exit=False) as served:
            error = await refused_at_initialize(served)
            assert cause in str(error)  # the message is the startup error itself
            assert error.code in (-32603, -32602)
            assert cause in error.data["message"]
            assert cause in served.stderr.read_text()  # and the log line, as before

    run(body())


def test_requests_before_initialize_get_the_startup_error_too(data_dir: Path) -> None:
    async def body() -> None:
        async with serve(data_dir, "nobody", check_exit=False) as served:
            with pytest.raises(acp.RequestError) as early:
                await served.conn.list_sessions()
            assert "no agent 'nobody'" in str(early.value)
            assert served.process.returncode is None  # still waiting for initialize
            error = await refused_at_initialize(served)
            assert "no agent 'nobody'" in str(error)

    run(body())


def test_a_failing_session_new_or_load_names_its_cause(data_dir: Path, tmp_path: Path) -> None:
    model = script(tmp_path, {"chat": ["fine"]})

    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", model) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            with pytest.raises(acp.RequestError) as relative:
                await served.conn.new_session(cwd="not/absolute", mcp_servers=[])
            assert "cwd must be an absolute path" in relative.value.data["message"]
            with pytest.raises(acp.RequestError) as unknown:
                await served.conn.load_session(
                    cwd=str(tmp_path), session_id="conv-nosuchthing", mcp_servers=[]
                )
            assert unknown.value.code == -32002
            assert "conv-nosuchthing" in unknown.value.data["message"]
            sid = await served.new_session(tmp_path)  # the connection is still up
            assert (await served.prompt(sid, "hi")).stop_reason == "end_turn"

    run(body())


# -- titles ------------------------------------------------------------------------------------


def test_the_title_rule_takes_the_last_paragraph() -> None:
    titled = conversation_title(PREAMBLE + "\n\nplot the sales by month")
    assert titled == "plot the sales by month"
    assert (
        conversation_title("  one   paragraph\nover two lines ") == "one paragraph over two lines"
    )
    assert conversation_title("words first\n\n  \n\n") == "words first"  # blank paragraphs skip
    long = conversation_title("word " * 40)
    assert len(long) <= 60 and long.endswith("…") and not long.startswith(" ")
    assert conversation_title(" \n\n ") == ""


def test_a_clients_preamble_is_not_the_title(data_dir: Path, tmp_path: Path) -> None:
    model = script(tmp_path, {"chat": ["Here is the plot."]})

    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", model) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            sid = await served.new_session(tmp_path)
            await served.prompt(sid, PREAMBLE + "\n\nplot the sales by month")
            listed = await served.conn.list_sessions()
            assert [s.title for s in listed.sessions] == ["plot the sales by month"]

    run(body())


# -- replay ------------------------------------------------------------------------------------


def _set_replay(data_dir: Path, value: bool) -> None:
    path = data_dir / "agents" / "innovator-001" / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["acp"] = {"replay": value}
    path.write_text(json.dumps(config), encoding="utf-8")


@pytest.mark.parametrize("how", ["flag", "config"])
def test_no_replay_loads_without_replaying_and_keeps_the_context(
    data_dir: Path, tmp_path: Path, how: str
) -> None:
    first = script(tmp_path, {"chat": ["Noted: 42."]})
    second = script(tmp_path, {"chat": ["It was 42."]})

    async def write() -> str:
        async with serve(data_dir, "innovator-001", "--model", first) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            sid = await served.new_session(tmp_path)
            await served.prompt(sid, "remember the number 42")
            return sid

    sid = run(write())
    if how == "config":
        _set_replay(data_dir, False)
    args = ("--no-replay",) if how == "flag" else ()
    client = RecordingClient()

    async def load() -> None:
        async with serve(data_dir, "innovator-001", "--model", second, *args, client=client) as s:
            await s.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            await s.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert client.of(UserMessageChunk) == [] and client.of(AgentMessageChunk) == []
            response = await s.prompt(sid, "what was the number?")
            assert response.field_meta["agentkit"]["turns"][0]["scenario"] == "C"
            assert client.text(sid) == "It was 42."

    run(load())
