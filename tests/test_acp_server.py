"""``agentkit acp``: a real subprocess driven by the ``agent-client-protocol`` client.

Chat turns as message chunks, the desk's question → consent → tool flow with permission
requests (allow, reject, no answer), plan updates, cancel, load after a restart, busy
conversations, errors, and no process left behind.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import AgentPlanUpdate, ToolCallStart, UserMessageChunk
from agentkit.store import ConversationKey, FileConversationStore

from tests._acp_peer import AGENTKIT, FAKE_ACP_AGENT, HANG_GUARD, RecordingClient, Served, serve

REPLY = "Hello from the script. How can I help?"
QUESTION = "What should the trader be called?"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def script(tmp_path: Path, name: str, replies: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    return f"scripted:{path}"


def agentkit(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), *args],
        stdin=subprocess.DEVNULL,  # `acp` with a startup error answers requests until EOF
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def history(data_dir: Path, agent_id: str, conversation: str) -> list[dict[str, Any]]:
    done = agentkit(data_dir, "history", agent_id, conversation, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def traders(data_dir: Path) -> list[str]:
    done = agentkit(data_dir, "tool", "desk-001", "list_traders")
    assert done.returncode == 0, done.stderr
    return [trader["name"] for trader in json.loads(done.stdout)["traders"]]


def seed_desk(data_dir: Path) -> None:
    for tool, args in (
        ("create_model_config", '{"provider": "openai", "model": "gpt-4o"}'),
        (
            "create_exchange_config",
            '{"exchange": "binance", "account_name": "main", "api_key": "AK-123456789",'
            ' "secret_key": "SK-987654321"}',
        ),
    ):
        done = agentkit(data_dir, "tool", "desk-001", tool, args)
        assert done.returncode == 0, done.stderr


def step(id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


CREATE = step(
    "s3",
    "tool",
    title="Create trader Alpha",
    tool_name="create_trader",
    tool_args={"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"},
)
DESK_SCRIPT = {
    "plan": [
        {
            "goal": "create a trader",
            "steps": [
                step("s1", "tool", title="Read the exchange accounts",
                     tool_name="get_exchange_configs", tool_args={}),
                step("s2", "ask_user", title="Ask for a name", instruction=QUESTION),
            ],
        }
    ],
    "replan": [
        {"action": "continue"},
        {
            "action": "replace_remaining",
            "steps": [CREATE, step("s4", "respond", title="Confirm", instruction="Confirm it.")],
        },
        {"action": "continue"},
    ],
    "respond": ["Trader Alpha is ready."],
}  # fmt: skip


async def initialized(served: Served) -> Any:
    return await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)


# -- handshake and chat ------------------------------------------------------------------------


def test_initialize_advertises_what_the_server_implements(data_dir: Path) -> None:
    async def body() -> None:
        async with serve(data_dir, "innovator-001") as served:
            info = await initialized(served)
            assert info.protocol_version == acp.PROTOCOL_VERSION
            capabilities = info.agent_capabilities
            assert capabilities.load_session is True
            assert capabilities.session_capabilities.list is not None
            assert capabilities.prompt_capabilities.embedded_context is True
            assert capabilities.prompt_capabilities.image is False
            assert info.auth_methods == []
            assert info.agent_info.name == "agentkit:innovator-001"
            assert "Innovator" in info.agent_info.title
            frame = next(f for f in served.frames if f.get("id") == 0)
            assert frame["result"]["agentCapabilities"]["loadSession"] is True

    run(body())


def test_a_chat_turn_streams_message_chunks_and_is_a_conversation(
    data_dir: Path, tmp_path: Path
) -> None:
    model = script(tmp_path, "chat", {"chat": [REPLY, "Second answer."]})

    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", model) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            assert sid.startswith("conv-")
            first = await served.prompt(sid, "hello there")
            chunks = served.client.of(acp.schema.AgentMessageChunk, sid)
            assert len(chunks) > 1  # streamed, not one blob
            assert served.client.text(sid) == REPLY
            assert first.stop_reason == "end_turn"
            assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
            assert first.usage.output_tokens > 0
            turns = first.field_meta["agentkit"]["turns"]
            assert [t["scenario"] for t in turns] == ["A"] and turns[0]["status"] == "completed"
            second = await served.prompt(sid, "and again")
            assert second.field_meta["agentkit"]["turns"][0]["scenario"] == "B"
            assert second.usage.total_tokens > first.usage.total_tokens  # cumulative
            listed = await served.conn.list_sessions(cwd=str(tmp_path))
            assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "hello there")]
            unused = await served.new_session(tmp_path)  # never prompted: not a conversation
            assert unused not in {
                s.session_id for s in (await served.conn.list_sessions()).sessions
            }

    run(body())
    listed = json.loads(agentkit(data_dir, "conversations", "innovator-001", "--json").stdout)
    messages = history(data_dir, "innovator-001", listed[0]["conversationId"])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "hello there"),
        ("assistant", REPLY),
        ("user", "and again"),
        ("assistant", "Second answer."),
    ]


# -- the desk: question, consent, tool ---------------------------------------------------------


async def desk_question(served: Served, cwd: Path) -> str:
    """The first desk prompt: it asks for a name (stop end_turn, the question as the reply)."""
    await initialized(served)
    sid = await served.new_session(cwd)
    response = await served.prompt(sid, "create a trader on my binance account")
    assert response.stop_reason == "end_turn"
    assert served.client.text(sid) == QUESTION
    assert served.client.permission_requests == []
    return sid


def test_question_then_permission_allowed_runs_the_tool_exactly_once(
    data_dir: Path, tmp_path: Path
) -> None:
    seed_desk(data_dir)
    model = script(tmp_path, "desk", DESK_SCRIPT)
    client = RecordingClient(permission="allow")

    async def body() -> str:
        async with serve(data_dir, "desk-001", "--model", model, client=client) as served:
            sid = await desk_question(served, tmp_path)
            plans = client.plans(sid)
            assert plans[0] == [
                ("Read the exchange accounts", "pending"),
                ("Ask for a name", "pending"),
            ]
            assert plans[-1] == [
                ("Read the exchange accounts", "completed"),
                ("Ask for a name", "in_progress"),
            ]
            reads = client.of(ToolCallStart, sid)
            assert {call.title for call in reads} >= {"get_exchange_configs"}
            assert all(call.kind == "read" for call in reads)
            assert "SK-987654321" not in json.dumps([f for f in served.frames], default=str)
            client.clear()

            response = await served.prompt(sid, "Alpha")
            assert response.stop_reason == "end_turn"
            [(tool_call, options)] = client.permission_requests
            assert tool_call.title == "create_trader" and tool_call.kind == "edit"
            assert tool_call.raw_input == CREATE["tool_args"]
            assert {(o.option_id, o.kind) for o in options} == {
                ("allow", "allow_once"),
                ("reject", "reject_once"),
            }
            events = client.tool_events(sid)
            consent = [e for e in events if e[1] == tool_call.tool_call_id]
            assert consent == [
                ("tool_call", tool_call.tool_call_id, "pending"),
                ("tool_call_update", tool_call.tool_call_id, "in_progress"),
                ("tool_call_update", tool_call.tool_call_id, "completed"),
            ]
            assert client.text(sid) == "Trader Alpha is ready."
            statuses = [dict(plan) for plan in client.plans(sid)]
            assert statuses[0]["Ask for a name"] == "completed"  # the answer resumed the plan
            order = [plan.get("Create trader Alpha") for plan in statuses]
            assert order.index("in_progress") < order.index("completed")
            assert statuses[-1] == {
                "Read the exchange accounts": "completed",
                "Ask for a name": "completed",
                "Create trader Alpha": "completed",
                "Confirm": "completed",
            }
            turns = response.field_meta["agentkit"]["turns"]
            assert [t["status"] for t in turns] == ["completed", "completed"]  # Alpha, then yes
            return sid

    sid = run(body())
    assert traders(data_dir) == ["Alpha"]
    roles = [(m["role"], m["content"]) for m in history(data_dir, "desk-001", sid)]
    assert roles[2] == ("user", "Alpha") and roles[4] == ("user", "yes")
    assert roles[-1] == ("assistant", "Trader Alpha is ready.")
    state = json.loads(agentkit(data_dir, "state", "desk-001", sid, "--json").stdout)
    (decided,) = state["execution_state"]["decisions"]  # decided by id, as an ACP decision
    assert (decided["decision"], decided["source"]) == ("approve", "acp")


def test_permission_rejected_never_runs_the_tool(data_dir: Path, tmp_path: Path) -> None:
    seed_desk(data_dir)
    model = script(tmp_path, "desk", DESK_SCRIPT)
    client = RecordingClient(permission="reject")

    async def body() -> None:
        async with serve(data_dir, "desk-001", "--model", model, client=client) as served:
            sid = await desk_question(served, tmp_path)
            client.clear()
            response = await served.prompt(sid, "Alpha")
            assert response.stop_reason == "end_turn"
            [(tool_call, _options)] = client.permission_requests
            assert [e[2] for e in client.tool_events(sid) if e[1] == tool_call.tool_call_id] == [
                "pending",
                "failed",
            ]
            assert "cancelled" in client.text(sid) and "create_trader" in client.text(sid)
            state = json.loads(agentkit(data_dir, "state", "desk-001", sid, "--json").stdout)
            assert state["execution_state"]["status"] == "completed"
            (decided,) = state["execution_state"]["decisions"]
            assert (decided["decision"], decided["source"]) == ("reject", "acp")

    run(body())
    assert traders(data_dir) == []


@pytest.mark.parametrize("answer", ["cancelled", "error", "unknown"])
def test_no_answer_to_a_permission_request_runs_nothing(
    data_dir: Path, tmp_path: Path, answer: str
) -> None:
    seed_desk(data_dir)
    model = script(tmp_path, "desk", DESK_SCRIPT)
    client = RecordingClient(permission=answer)

    async def body() -> str:
        async with serve(data_dir, "desk-001", "--model", model, client=client) as served:
            sid = await desk_question(served, tmp_path)
            client.clear()
            response = await served.prompt(sid, "Alpha")
            assert response.stop_reason == "end_turn"
            assert len(client.permission_requests) == 1
            # the question stays: shown as the reply, still pending in the planner
            assert "Shall I go ahead?" in client.text(sid)
            assert client.tool_events(sid)[-1][2] == "failed"
            return sid

    sid = run(body())
    assert traders(data_dir) == []
    state = json.loads(agentkit(data_dir, "state", "desk-001", sid, "--json").stdout)
    assert state["execution_state"]["status"] == "waiting_confirmation"


def test_secrets_are_masked_in_tool_calls_and_permission_requests(
    data_dir: Path, tmp_path: Path
) -> None:
    secrets = {"api_key": "AK-SECRET-0000-1111", "secret_key": "SK-SECRET-2222-3333"}
    add = step(
        "x1",
        "tool",
        title="Add the account",
        tool_name="create_exchange_config",
        tool_args={"exchange": "okx", "account_name": "alt", **secrets},
    )
    model = script(
        tmp_path,
        "secrets",
        {
            "plan": [{"goal": "add", "steps": [add, step("x2", "respond", instruction="Say so")]}],
            "replan": [{"action": "continue"}],
            "respond": ["Added."],
        },
    )

    async def body() -> None:
        async with serve(data_dir, "desk-001", "--model", model) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            key, secret = secrets["api_key"], secrets["secret_key"]
            said = f"add my okx account alt: key {key} secret {secret}"
            response = await served.prompt(sid, said)
            assert response.stop_reason == "end_turn"
            [(tool_call, _options)] = served.client.permission_requests
            assert tool_call.raw_input["api_key"] == "****1111"
            assert tool_call.raw_input["secret_key"] == "****3333"
            assert served.client.text(sid) == "Added."
            wire = json.dumps(served.frames)
            assert all(secret not in wire for secret in secrets.values())

    run(body())
    done = agentkit(data_dir, "tool", "desk-001", "get_exchange_configs")
    assert "okx" in done.stdout  # it ran, with the real keys (stored, shown masked)


# -- cancel, busy ------------------------------------------------------------------------------


def slow_model() -> str:
    return f"acp:{sys.executable} {FAKE_ACP_AGENT}"


@pytest.mark.real_model
def test_cancel_mid_turn_ends_the_prompt_cancelled_and_keeps_the_partial_reply(
    data_dir: Path, tmp_path: Path
) -> None:
    async def body() -> str:
        async with serve(data_dir, "innovator-001", "--model", slow_model()) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            prompt = asyncio.ensure_future(served.prompt(sid, "please be slow"))
            await served.client.wait_for(lambda: served.client.text(sid) != "", "a first chunk")
            served.note_children()  # the model's agent process
            assert served.children
            await served.conn.cancel(session_id=sid)
            response = await prompt
            assert response.stop_reason == "cancelled"
            assert response.field_meta["agentkit"]["turns"][0]["status"] == "cancelled"
            # the session is usable afterwards
            again = await served.prompt(sid, "hello")
            assert again.stop_reason == "end_turn"
            return sid

    sid = run(body())
    messages = history(data_dir, "innovator-001", sid)
    assert (messages[0]["role"], messages[0]["content"]) == ("user", "please be slow")
    assert messages[1]["role"] == "assistant" and messages[1]["content"].startswith("working")


@pytest.mark.real_model
def test_a_second_prompt_in_a_busy_session_is_refused(data_dir: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", slow_model()) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            prompt = asyncio.ensure_future(served.prompt(sid, "please be slow"))
            await served.client.wait_for(lambda: served.client.text(sid) != "", "a first chunk")
            with pytest.raises(acp.RequestError) as refused:
                await served.prompt(sid, "me too")
            assert refused.value.code == -32001 and "busy" in str(refused.value).lower()
            await served.conn.cancel(session_id=sid)
            assert (await prompt).stop_reason == "cancelled"

    run(body())


def test_a_conversation_busy_in_another_process_is_refused_clearly(
    data_dir: Path, tmp_path: Path
) -> None:
    model = script(tmp_path, "chat", {"chat": [REPLY]})

    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", model) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            await served.prompt(sid, "first")
            store = FileConversationStore(data_dir)
            with (
                store.hold(ConversationKey("innovator-001", sid), timeout=5),  # another writer
                pytest.raises(acp.RequestError) as refused,
            ):
                await served.prompt(sid, "second")
            error = refused.value
            assert error.code == -32001
            assert error.data["code"] == "conversation_busy"
            assert "retry" in error.data["message"]
            assert (await served.prompt(sid, "third")).stop_reason == "end_turn"

    run(body())
    sid = json.loads(agentkit(data_dir, "conversations", "innovator-001", "--json").stdout)
    contents = [m["content"] for m in history(data_dir, "innovator-001", sid[0]["conversationId"])]
    assert "second" not in contents  # refused before anything was written


# -- load after a restart ----------------------------------------------------------------------


def test_load_after_a_killed_process_replays_history_then_runs_scenario_c(
    data_dir: Path, tmp_path: Path
) -> None:
    model = script(tmp_path, "chat", {"chat": [REPLY]})
    restored = script(tmp_path, "restored", {"chat": ["Restored."]})  # a new process, a new script

    async def first_process() -> str:
        async with serve(data_dir, "innovator-001", "--model", model, check_exit=False) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            await served.prompt(sid, "remember the number 42")
            served.process.kill()  # no goodbye
            await served.process.wait()
            return sid

    sid = run(first_process())
    client = RecordingClient()

    async def second_process() -> None:
        async with serve(data_dir, "innovator-001", "--model", restored, client=client) as served:
            await initialized(served)
            listed = await served.conn.list_sessions()
            assert sid in {s.session_id for s in listed.sessions}
            await served.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            kinds = [type(u).__name__ for u in (u for _s, u in client.updates)]
            assert kinds == ["UserMessageChunk", "AgentMessageChunk"]
            assert client.user_text(sid) == "remember the number 42"
            assert client.text(sid) == REPLY
            client.clear()
            response = await served.prompt(sid, "what was the number?")
            turn = response.field_meta["agentkit"]["turns"][0]
            assert turn["scenario"] == "C"
            assert client.text(sid) == "Restored."
            log = agentkit(data_dir, "history", "innovator-001", sid, "--json")
            assert log.returncode == 0
            with pytest.raises(acp.RequestError) as missing:
                await served.conn.load_session(
                    cwd=str(tmp_path), session_id="conv-nosuchthing", mcp_servers=[]
                )
            assert missing.value.code == -32002

    run(second_process())
    turn_dir = data_dir / "agents" / "innovator-001" / "conversations" / sid
    logs = "".join(path.read_text() for path in turn_dir.glob("*/messages.log"))
    assert "scenario C" in logs


# -- errors ------------------------------------------------------------------------------------


def test_errors_are_json_rpc_errors_or_a_reply_and_the_process_stays_up(
    data_dir: Path, tmp_path: Path
) -> None:
    broken = script(tmp_path, "broken", {"plan": ["not a plan"]})  # no chat replies at all

    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", broken) as served:
            await initialized(served)
            with pytest.raises(acp.RequestError) as unknown:
                await served.prompt("conv-unknown", "hi")
            assert unknown.value.code == -32002
            with pytest.raises(acp.RequestError) as invalid:
                await served.prompt("../etc", "hi")
            assert invalid.value.code == -32602
            sid = await served.new_session(tmp_path)
            with pytest.raises(acp.RequestError) as empty:
                await served.prompt(sid, "   ")
            assert empty.value.code == -32602
            with pytest.raises(acp.RequestError) as relative:
                await served.conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert relative.value.code == -32602
            failed = await served.prompt(sid, "hello")  # the model fails inside the turn
            assert failed.stop_reason == "end_turn"
            assert failed.field_meta["agentkit"]["turns"][0]["status"] == "failed"
            assert "no replies for purpose 'chat'" in served.client.text(sid)
            assert (await initialized(served)).protocol_version == acp.PROTOCOL_VERSION

    run(body())


def test_an_unknown_agent_or_model_fails_before_serving(data_dir: Path) -> None:
    done = agentkit(data_dir, "acp", "nobody")
    assert done.returncode == 2 and done.stdout == ""
    assert "no agent 'nobody'" in done.stderr
    done = agentkit(data_dir, "acp", "innovator-001", "--model", "nonsense:x")
    assert done.returncode == 2 and done.stdout == "" and "unknown backend" in done.stderr


def test_prompt_content_blocks_become_one_message(data_dir: Path, tmp_path: Path) -> None:
    model = script(tmp_path, "chat", {"chat": [REPLY]})

    async def body() -> str:
        async with serve(data_dir, "innovator-001", "--model", model) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            blocks = [
                acp.text_block("summarise this"),
                acp.resource_link_block("notes.md", "file:///tmp/notes.md"),
                acp.resource_block(acp.embedded_text_resource("file:///tmp/a.txt", "alpha beta")),
            ]
            await served.conn.prompt(session_id=sid, prompt=blocks)
            with pytest.raises(acp.RequestError) as image:
                await served.conn.prompt(
                    session_id=sid, prompt=[acp.image_block("AAAA", "image/png")]
                )
            assert image.value.code == -32602
            return sid

    sid = run(body())
    first = history(data_dir, "innovator-001", sid)[0]["content"]
    assert first == (
        "summarise this\n\n[notes.md](file:///tmp/notes.md)\n\n"
        "Context from file:///tmp/a.txt:\nalpha beta"
    )


@pytest.mark.real_model
def test_no_process_is_left_after_the_client_closes_stdin(data_dir: Path, tmp_path: Path) -> None:
    async def body() -> set[int]:
        async with serve(data_dir, "innovator-001", "--model", slow_model()) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            response = await served.prompt(sid, "hi")  # starts the model's own agent process
            assert response.stop_reason == "end_turn"
            served.note_children()
            assert served.children  # checked gone by serve() after stdin closes
            return {served.process.pid, *served.children}

    pids = run(body())
    assert pids


@pytest.mark.real_model
def test_sigterm_stops_the_server_cleanly(data_dir: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with serve(data_dir, "innovator-001", "--model", slow_model()) as served:
            await initialized(served)
            sid = await served.new_session(tmp_path)
            prompt = asyncio.ensure_future(served.prompt(sid, "please be slow"))
            await served.client.wait_for(lambda: served.client.text(sid) != "", "a first chunk")
            served.note_children()
            served.process.terminate()  # mid-turn
            response = await prompt  # the stopped prompt still answers before the exit
            assert response.stop_reason == "cancelled"
            assert await asyncio.wait_for(served.process.wait(), HANG_GUARD) == 0
            # serve() checks the model's agent process is gone too

    run(body())
    listed = json.loads(agentkit(data_dir, "conversations", "innovator-001", "--json").stdout)
    assert listed[0]["status"] == "idle"  # the turn was stopped and recorded, not left running


def test_a_plan_update_is_the_acp_type(data_dir: Path, tmp_path: Path) -> None:
    """Plan updates arrive as ``plan`` session updates the client library parses."""
    seed_desk(data_dir)
    model = script(tmp_path, "desk", DESK_SCRIPT)

    async def body() -> None:
        async with serve(data_dir, "desk-001", "--model", model) as served:
            sid = await desk_question(served, tmp_path)
            plans = served.client.of(AgentPlanUpdate, sid)
            assert plans and all(e.priority == "medium" for p in plans for e in p.entries)
            assert not served.client.of(UserMessageChunk, sid)

    run(body())
