"""The test kit users build on: FunctionModel, the scripted session backend, the request switch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agentkit import (
    Agent,
    FunctionModel,
    ModelRequest,
    ModelRequestsBlockedError,
    ScriptedSessionBackend,
    testing,
)
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.events import AgentOutputEvent, AskUserEvent, ToolCallEvent
from agentkit.models import ChatMessage, create_model, tool_call
from agentkit.models.cassette import RecordingModel
from agentkit.models.openai import OpenAIModel
from agentkit.sessions import SessionPool
from agentkit_desk import open_desk, run_desk_tool

from tests.conftest import run_cli

# -- FunctionModel ----------------------------------------------------------------------------


def step(id: str, type: str, **fields: object) -> dict[str, object]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


def desk_flow(request: ModelRequest) -> object:
    """One function for the whole create-a-trader flow, deciding from what it is asked."""
    prompt = request.prompt
    if request.purpose == "plan":
        assert {"get_exchange_configs", "create_trader"} <= set(request.tool_names)
        return {
            "goal": "create a trader",
            "steps": [
                step("s1", "tool", tool_name="get_exchange_configs", tool_args={}),
                step("s2", "ask_user", instruction="What should the trader be called?"),
            ],
        }
    if request.purpose == "replan":
        if "Alpha" in prompt and "s3" not in prompt:  # the user answered with a name
            args = {"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"}
            return {
                "action": "replace_remaining",
                "steps": [
                    step("s3", "tool", tool_name="create_trader", tool_args=args),
                    step("s4", "respond", instruction="Confirm the trader was created."),
                ],
            }
        return {"action": "continue"}
    if request.purpose == "respond":
        return "Trader Alpha is ready."
    raise AssertionError(f"unexpected call {request.purpose}")


def seed_desk(workspace: Path) -> None:
    run_desk_tool(workspace, "create_model_config", '{"provider": "openai", "model": "gpt-4o"}')
    run_desk_tool(
        workspace,
        "create_exchange_config",
        '{"exchange": "binance", "account_name": "main", "api_key": "A1", "secret_key": "S1"}',
    )


def test_a_function_model_drives_a_whole_desk_flow(data_dir: Path) -> None:
    workspace = data_dir / "agents" / "desk-001" / "workspace"
    seed_desk(workspace)
    model = FunctionModel(desk_flow)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        asked = agent.send("create a trader on my binance account")
        assert asked.text == "What should the trader be called?"
        assert [e.kind for e in asked.events if isinstance(e, AskUserEvent)] == ["question"]
        consent = agent.send("Alpha", asked.conversation_id)
        pauses = [e for e in consent.events if isinstance(e, AskUserEvent)]
        assert [(e.kind, e.tool_name) for e in pauses] == [("confirmation", "create_trader")]
        with open_desk(workspace) as db:
            assert db.traders() == []  # nothing runs before the consent
        done = agent.send("yes", asked.conversation_id)
        assert done.text == "Trader Alpha is ready."
    with open_desk(workspace) as db:
        assert [trader.name for trader in db.traders()] == ["Alpha"]
    planned = [
        e.name
        for turn in (asked, consent, done)
        for e in turn.events
        if isinstance(e, ToolCallEvent) and not e.id.startswith("live-")
    ]
    assert planned == ["get_exchange_configs", "create_trader"]  # the tool ran once
    purposes = [r.purpose for r in model.requests]
    assert purposes[0] == "plan" and purposes[-1] == "respond"
    assert [r.index for r in model.requests] == list(range(len(model.requests)))
    assert all(r.json_schema is not None for r in model.requests if r.purpose != "respond")


def test_a_streaming_function_streams_its_chunks(data_dir: Path) -> None:
    def chunks(request: ModelRequest) -> Iterator[str]:
        assert request.purpose == "chat" and request.prompt == "hi"
        yield "Hel"
        yield "lo, "
        yield "there"

    with Agent.open("innovator-001", data_dir=data_dir, model=FunctionModel(chunks)) as agent:
        turn = agent.send("hi")
    assert [e.text for e in turn.events if isinstance(e, AgentOutputEvent)] == [
        "Hel",
        "lo, ",
        "there",
    ]
    assert turn.text == "Hello, there"


def test_an_async_generator_and_an_async_function_both_work() -> None:
    async def agen(request: ModelRequest) -> AsyncIterator[str]:
        for word in ("a", "b"):
            await asyncio.sleep(0)
            yield word

    async def coro(request: ModelRequest) -> dict[str, int]:
        return {"n": len(request.messages)}

    async def scenario() -> None:
        sent = [ChatMessage(role="user", content="x")]
        streamed = await FunctionModel(agen).complete(sent, purpose="chat")
        assert streamed.text == "ab"
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        value = await FunctionModel(coro).complete(sent, purpose="plan", schema=schema)
        assert value.structured == {"n": 1}

    asyncio.run(scenario())


def test_an_invalid_json_reply_is_refused_by_the_schema_like_any_model() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    model = FunctionModel(lambda request: {"n": "not a number"})
    with pytest.raises(StructuredOutputError, match="n: 'not a number' is not of type"):
        asyncio.run(model.complete([], purpose="plan", schema=schema))


def test_an_invalid_plan_gets_the_repair_round(data_dir: Path) -> None:
    def planner(request: ModelRequest) -> object:
        if request.purpose == "plan":
            if "did not validate" not in request.prompt and request.index == 0:
                return {"goal": "x", "steps": [step("s1", "tool", tool_name="no_such_tool")]}
            return {"goal": "greet", "steps": [step("s1", "respond", instruction="Say hi.")]}
        if request.purpose == "replan":
            return {"action": "continue"}
        return "Hi!"

    model = FunctionModel(planner)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        turn = agent.send("hello")
    assert turn.result.status == "completed" and turn.text == "Hi!"
    plans = [r for r in model.requests if r.purpose == "plan"]
    assert len(plans) == 2  # the first reply, then the repair round
    assert "no_such_tool" in plans[1].messages[-2].content  # shown its own reply again


def test_native_tool_calls_from_a_function_drive_the_tool_loop(data_dir: Path) -> None:
    config = data_dir / "agents" / "desk-001" / "config.json"
    settings = json.loads(config.read_text())
    settings["planner"]["strategy"] = "tool_loop"
    config.write_text(json.dumps(settings))
    seed_desk(data_dir / "agents" / "desk-001" / "workspace")

    def act(request: ModelRequest) -> object:
        assert request.purpose == "act" and "list_traders" in request.tool_names
        if not any(m.role == "tool" or "[tool_result" in m.content for m in request.messages):
            return tool_call("get_exchange_configs")
        return "You have one exchange account: binance main."

    model = FunctionModel(act)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        turn = agent.send("which exchange accounts do I have?")
    calls = [e.name for e in turn.events if isinstance(e, ToolCallEvent)]
    assert "get_exchange_configs" in calls
    assert turn.text == "You have one exchange account: binance main."
    assert model.requests[0].tools and model.requests[0].json_schema is None


def test_settings_reach_the_function_read_only() -> None:
    seen: list[object] = []
    model = FunctionModel(
        lambda r: seen.append(r.settings["variant"]) or "ok", settings={"variant": "B"}
    )
    asyncio.run(model.complete([], purpose="chat"))
    assert seen == ["B"]
    with pytest.raises(TypeError):
        model.requests[0].settings["variant"] = "A"  # type: ignore[index]


def test_a_function_that_raises_is_a_model_error_naming_it() -> None:
    def broken(request: ModelRequest) -> str:
        raise KeyError("boom")

    with pytest.raises(ModelError, match=r"function:.*broken.*KeyError"):
        asyncio.run(FunctionModel(broken).complete([], purpose="chat"))


def test_a_function_model_is_recorded_and_replayed(data_dir: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    recorded = RecordingModel(FunctionModel(lambda r: f"echo {r.prompt}"), cassette)
    with Agent.open("innovator-001", data_dir=data_dir, model=recorded) as agent:
        first = agent.send("ping")
    assert first.text == "echo ping"
    replayed = create_model(f"replay:{cassette}")
    fresh = testing.data_root(tmp_path / "again", ["innovator-001"], source=data_dir)
    with Agent.open("innovator-001", data_dir=fresh, model=replayed) as agent:
        again = agent.send("ping")
    assert again.text == "echo ping"


def reply_upper(request: ModelRequest) -> str:
    return request.prompt.upper()


def test_the_function_spec_imports_a_callable(data_dir: Path) -> None:
    spec = "function:tests.test_testing_kit:reply_upper"
    result = run_cli("--data-dir", str(data_dir), "send", "innovator-001", "--model", spec, "hi!")
    assert result.exit_code == 0, result.stderr
    assert "HI!" in result.stdout
    bad = run_cli("send", "innovator-001", "--model", "function:tests.nothing", "hi")
    assert bad.exit_code == 2 and "MODULE:CALLABLE" in bad.stderr


def test_a_function_model_in_create_app(data_dir: Path) -> None:
    """Served over a real loopback server, the function answers the chat endpoint."""
    import httpx
    from agentkit.api import create_app

    from tests.fakes.live_api import live_server, parse_sse

    model = FunctionModel(lambda r: "served " + r.prompt)
    with (
        live_server(lambda port: create_app(data_dir, model=model, port=port)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        response = client.post("/api/agent/innovator-001/chat", json={"message": "hi"})
    assert response.status_code == 200
    outputs = [e.data for e in parse_sse(response.text) if e.event == "agent_output"]
    assert "".join(str(o.get("text", "")) for o in outputs) == "served hi"
    assert [r.prompt for r in model.requests] == ["hi"]


def test_a_function_model_in_the_eval_api(data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from agentkit.eval import run_eval

    scenario = tmp_path / "greet.yaml"
    scenario.write_text(
        "v: 1\nid: greet\nlanguage: en\nagent: innovator-001\nturns:\n  - user: hi\n"
        "    expect:\n      answer_contains: [HI]\n"
    )
    table = run_eval(
        [scenario], model=FunctionModel(reply_upper), data_dir=data_dir, progress=False
    )
    assert table["passed"].tolist() == [True]
    assert table["model"].tolist() == ["function:reply_upper"]


# -- the scripted session backend --------------------------------------------------------------


def test_the_three_scenarios_with_a_scripted_session_backend(data_dir: Path) -> None:
    backend = ScriptedSessionBackend(lambda r: f"reply {r.turn + 1} of session {r.session_index}")
    with Agent.open("innovator-001", data_dir=data_dir, model=backend) as agent:
        first = agent.send("hello")
        assert first.session.scenario == "A"
        session = backend.sessions[0]
        assert session.context[0].content == agent.system_prompt()
        second = agent.send("and again", first.conversation_id)
        assert second.session.scenario == "B"
        assert session.received == ["hello", "and again"]  # only the new message each time
        assert [m.role for m in session.context] == ["system", "user", "assistant"] * 1 + [
            "user",
            "assistant",
        ]
        session.kill()  # the process died
        third = agent.send("are you there?", first.conversation_id)
    assert third.session.scenario == "C"
    restored = backend.sessions[1].received[0]
    assert restored.startswith("[Earlier in this conversation: the last 4 messages]")
    assert "assistant: reply 2 of session 0" in restored
    assert third.text == "reply 1 of session 1"


def test_scenario_c_after_the_pool_drops_an_idle_session(data_dir: Path) -> None:
    backend = ScriptedSessionBackend(["one", "two", "three"])
    clock = [1000.0]
    pool = SessionPool(idle_timeout=60, clock=lambda: clock[0])
    with Agent.open("innovator-001", data_dir=data_dir, model=backend, pool=pool) as agent:
        first = agent.send("hi")
        clock[0] += 61
        asyncio.run(pool.reap())
        assert backend.sessions[0].closed and backend.live == []
        again = agent.send("still there?", first.conversation_id)
    assert again.session.scenario == "C" and again.text == "two"
    assert len(backend.sessions) == 2


def test_a_resumable_scripted_session_continues_its_context() -> None:
    async def scenario() -> None:
        backend = ScriptedSessionBackend(lambda r: str(len(r.context)), resumable=True)
        first = await backend.open(system_prompt="S", workdir=Path())
        async for _ in first.send("a"):
            pass
        second = await backend.open(system_prompt="S", workdir=Path(), resume_id=first.session_id)
        assert second.resumed
        replies = [e async for e in second.send("b")]
        assert replies[-1].text == "3"  # system, a, its reply

    asyncio.run(scenario())


def test_a_dead_scripted_session_refuses_to_send() -> None:
    async def scenario() -> None:
        backend = ScriptedSessionBackend(["x"])
        session = await backend.open(system_prompt="", workdir=Path())
        backend.sessions[0].kill()
        assert not session.is_alive()
        with pytest.raises(ModelError, match="not running"):
            async for _ in session.send("hi"):
                pass

    asyncio.run(scenario())


# -- real requests off -----------------------------------------------------------------------


def test_an_openai_model_raises_before_any_connection_is_made() -> None:
    accepted: list[object] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(listener.accept())

    watcher = threading.Thread(target=accept)
    watcher.start()
    try:
        made = OpenAIModel("gpt-x", base_url=f"http://127.0.0.1:{port}/v1", api_key=None)
        sent = [ChatMessage(role="user", content="hi")]
        with pytest.raises(ModelRequestsBlockedError, match="real model requests are off"):
            asyncio.run(made.complete(sent, purpose="chat"))
        with pytest.raises(ModelRequestsBlockedError):
            asyncio.run(made.complete(sent, purpose="plan", schema={"type": "object"}))
    finally:
        watcher.join()
        listener.close()
    assert accepted == []  # nothing ever connected


def test_every_real_backend_refuses_while_requests_are_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent = [ChatMessage(role="user", content="hi")]
        for spec in ("llama", "openai:gpt-4o-mini"):
            model = create_model(spec)  # creating one is allowed: nothing is sent
            assert model.real_requests
            with pytest.raises(ModelRequestsBlockedError) as caught:
                await model.complete(sent, purpose="chat")  # type: ignore[union-attr]
            assert caught.value.spec == spec
        for spec in ("acp:some-agent --stdio", "claude-cli"):
            backend = create_model(spec)
            with pytest.raises(ModelRequestsBlockedError):  # before any process starts
                await backend.open(system_prompt="", workdir=tmp_path)  # type: ignore[union-attr]
        for double in (FunctionModel(lambda r: "x"), ScriptedSessionBackend(["x"])):
            assert not double.real_requests

    asyncio.run(scenario())


def test_an_agent_turn_with_a_real_model_is_a_clear_error_and_writes_nothing(
    data_dir: Path,
) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model="openai:gpt-4o-mini") as agent:
        with pytest.raises(ModelRequestsBlockedError):
            agent.send("hi")
        assert agent.list_conversations() == []


def test_the_environment_switch_reaches_a_subprocess(data_dir: Path) -> None:
    # the autouse fixture set AGENTKIT_ALLOW_MODEL_REQUESTS=0 for this test, and its children
    script = Path(sys.executable).with_name("agentkit")
    argv = [str(script), "--data-dir", str(data_dir), "send", "innovator-001", "--model", "llama"]
    result = subprocess.run([*argv, "hi"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "real model requests are off" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_shell_environment_does_not_leak_into_a_test() -> None:
    import os

    assert "AGENTKIT_MODEL" not in os.environ and "OPENAI_BASE_URL" not in os.environ
    assert not testing.model_requests_allowed()


def test_clean_env_and_data_root(tmp_path: Path) -> None:
    env = {"AGENTKIT_MODEL": "llama", "OPENAI_API_KEY": "k", "HOME": "/root", "AGENTKIT_X": "1"}
    removed = testing.clean_env(keep=["AGENTKIT_X"], environ=env)
    assert env == {"HOME": "/root", "AGENTKIT_X": "1"}
    assert set(removed) == {"AGENTKIT_MODEL", "OPENAI_API_KEY"}
    root = testing.data_root(tmp_path / "root", ["innovator-001"], source=Path("data"))
    assert [p.name for p in (root / "agents").iterdir()] == ["innovator-001"]
    assert not (root / "agents" / "innovator-001" / "conversations").exists()
    with pytest.raises(FileExistsError):
        testing.data_root(root, ["innovator-001"], source=Path("data"))


@pytest.mark.real_model
def test_a_real_model_test_opts_in_by_its_marker() -> None:
    assert testing.model_requests_allowed()
    with testing.block_model_requests():
        assert not testing.model_requests_allowed()
    assert testing.model_requests_allowed()


def test_scripted_signals_give_a_scripted_model_the_routers_signals_only_when_asked() -> None:
    import asyncio

    from agentkit.errors import ModelError
    from agentkit.testing import ScriptedModel, scripted_signals

    plain = ScriptedModel({})
    assert not plain.scores and not plain.embeds
    with pytest.raises(ModelError, match="scores no likelihoods"):
        asyncio.run(plain.score([("Task: x", " ab")]))
    scorer = scripted_signals({}, score=lambda prompt, text: [-float(len(text))])
    assert scorer.scores and not scorer.embeds
    assert asyncio.run(scorer.score([("Task: x", " ab"), ("Task: y", " a")])) == [[-3.0], [-2.0]]
    assert scorer.pairs == [("Task: x", " ab"), ("Task: y", " a")]
    both = scripted_signals({}, score=lambda _p, _t: [0.0], embed=lambda text: [len(text), 1])
    assert both.embeds and both.scores
    assert asyncio.run(both.embed(["abc"])) == [[3, 1]]
    assert both.embedded == ["abc"]
