"""Every model call in agentkit goes through the call tracer (agentkit/calls/tracer.py).

Two checks. Statically: no module of agentkit/ outside the tracer and the model backends and
wrappers reads a model's request methods (``request``, ``stream``, ``complete``,
``complete_with_tools``, ``score``, ``embed``; a session's ``send``). At run time: every
backend's one entry point (:meth:`ChatModel.request`) and its scoring and embeddings are
instrumented for the test, and real flows run — an eval of chat, planner, native tool-loop,
simulated-user and compression scenarios, the router's likelihood vote, BFCL's prompt mode —
and every call they make must be inside a :class:`~agentkit.calls.tracer.ModelCall` of the
same purpose (:func:`~agentkit.calls.tracer.current_call`).
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agentkit.calls.tracer import CallTracer, current_call
from agentkit.models.base import ChatModel, ModelEvent, ModelRequest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "agentkit"
SCENARIOS = REPO / "data" / "scenarios"

#: what a model is asked through (a session model: ``send``)
MODEL_METHODS = frozenset(
    {"request", "stream", "complete", "complete_with_tools", "score", "embed"}
)
#: where a model may be called directly: the tracer, the backends and doubles, the wrappers
#: (a wrapper calls its inner model from inside the traced call), and the session that
#: presents a chat model as a session (called by the tracer's session call)
ALLOWED = (
    "agentkit/calls/tracer.py",
    "agentkit/models/",
    "agentkit/eval/budget.py",
    "agentkit/sessions/transcript.py",
)
#: receivers whose methods of those names are no model's: the tracer's call itself, the
#: secret mask's stream, an ExecutionState's ``complete``, a run scorer, a telemetry trace,
#: the HTTP layer's SSE writer (``agentkit.api.sse``)
NOT_MODELS = re.compile(r"^(call|self\.mask|ctx\.mask|(.+\.)?scorer|trace|state(\..+)?|sse)$")
SESSIONS = re.compile(r"session", re.IGNORECASE)
#: single places that read no language model: WordLlama's static embedding table (a lookup
#: and a mean, the router's local embedder option)
NO_MODEL_PLACES = frozenset({"agentkit/planning/tool_semantics.py self._model.embed"})
#: a method of these read without a call is a model's handed on (an untraced call later)
MODELS = re.compile(r"model|inner|backend", re.IGNORECASE)


def untraced(source: str, path: str = "<source>") -> list[str]:
    """The places in *source* that call a model's request method outside the tracer (or
    pass a model's method on: ``model.embed`` as a value)."""
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        receiver = ast.unparse(node.value)
        if node.attr in MODEL_METHODS:
            flagged = (
                not NOT_MODELS.match(receiver)
                if id(node) in called
                else bool(MODELS.search(receiver))
            )
        else:
            flagged = node.attr == "send" and bool(SESSIONS.search(receiver))
        if flagged:
            found.append((node.lineno, f"{path}:{node.lineno} {receiver}.{node.attr}"))
    return [place for _, place in sorted(found)]


def test_the_scan_finds_a_direct_model_call() -> None:
    source = """
async def summarise(model, session, sent, state, call):
    await model.complete(sent, purpose="summarize")
    async for _ in model.request(sent): ...
    vectors = await (embed or self.model.embed)(["x"])
    async for _ in session.send("hi"): ...
    state.complete("done")
    async for _ in call.stream(): ...
"""
    assert [place.split(" ")[1] for place in untraced(source)] == [
        "model.complete",
        "model.request",
        "self.model.embed",
        "session.send",
    ]


def test_no_module_calls_a_model_outside_the_tracer() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(ALLOWED):
            continue
        found += [
            place
            for place in untraced(path.read_text(encoding="utf-8"), relative)
            if f"{relative} {place.split(' ', 1)[1]}" not in NO_MODEL_PLACES
        ]
    assert found == [], "model calls outside agentkit/calls/tracer.py:\n" + "\n".join(found)


# -- at run time -------------------------------------------------------------------------------


@dataclass
class Guard:
    """What the instrumented backends saw: every call, and those made outside the tracer."""

    calls: list[str] = field(default_factory=list)
    escaped: list[str] = field(default_factory=list)

    def check(self, model: ChatModel, kind: str, purpose: str | None) -> None:
        call = current_call()
        self.calls.append(f"{kind}:{purpose or '-'}")
        where = f"{type(model).__name__} {kind} {purpose or ''}".strip()
        if call is None:
            self.escaped.append(f"{where}: no traced call")
        elif purpose is not None and call.purpose != purpose:
            self.escaped.append(f"{where}: inside a traced call of purpose {call.purpose}")


def _backends() -> Iterator[type[ChatModel]]:
    seen: set[type[ChatModel]] = set()
    pending = [ChatModel]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                pending.append(sub)
                yield sub


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> Guard:
    """Every backend class's own ``request``, ``score`` and ``embed`` report to a guard."""
    seen = Guard()
    for cls in list(_backends()):
        own = vars(cls)
        if "request" in own:
            monkeypatch.setattr(cls, "request", _guarded_request(seen, own["request"]))
        for name in ("score", "embed"):
            if name in own:
                monkeypatch.setattr(cls, name, _guarded_signal(seen, name, own[name]))
    return seen


def _guarded_request(
    seen: Guard, original: Callable[[ChatModel, ModelRequest], AsyncIterator[ModelEvent]]
) -> Callable[[ChatModel, ModelRequest], AsyncIterator[ModelEvent]]:
    async def request(self: ChatModel, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        seen.check(self, "tools" if request.tools else "request", request.purpose)
        async for event in original(self, request):
            yield event

    return request


def _guarded_signal(seen: Guard, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    async def signal(self: ChatModel, items: Sequence[Any]) -> Any:
        seen.check(self, name, None)
        return await original(self, items)

    return signal


def test_an_eval_of_every_engine_calls_its_models_only_through_the_tracer(
    guard: Guard, data_dir: Path
) -> None:
    pytest.importorskip("pandas")
    from agentkit.eval import load_scenario, run_eval

    names = [
        "chat_sessions_en",  # the chat engine
        "desk_create_trader_en",  # planner: plan, replans, respond
        "desk_sim_create_trader_en",  # a simulated user
        "local_tool_loop_create_trader_zh",  # native tool calls
        "memory_compression_facts_en",  # compression after the result
    ]
    frame = run_eval(
        [load_scenario(SCENARIOS / f"{name}.yaml") for name in names],
        model="scripted",
        data_dir=data_dir,
        progress=False,
    )
    assert (frame["error"] == "").all(), frame[["scenario", "error"]].to_dict("records")
    assert guard.escaped == []
    purposes = {call.split(":")[1] for call in guard.calls}
    assert {"chat", "plan", "replan", "respond", "summarize"} <= purposes, purposes
    assert sum(call.startswith("tools:") for call in guard.calls) > 0
    assert len(guard.calls) == int(frame["model_calls"].sum())


def test_the_routers_likelihood_vote_is_a_traced_call(guard: Guard) -> None:
    from agentkit.testing import scripted_signals

    model = scripted_signals({}, score=lambda _prompt, text: [-float(len(text))])
    tracer = CallTracer.standalone(model)

    async def vote() -> list[list[float]]:
        async with tracer.call("route", [], operation="text_completion") as call:
            return await call.score([("Task: a", " x"), ("Task: b", " xy")])

    assert asyncio.run(vote()) == [[-2.0], [-3.0]]
    assert guard.calls == ["score:-"] and guard.escaped == []
    assert tracer.usage.calls == 1 and [r.purpose for r in tracer.records] == ["route"]
    # the same call made directly is caught
    asyncio.run(model.score([("Task: a", " x")]))
    assert guard.escaped == ["ScoringScriptedModel score: no traced call"]


def test_bfcls_prompt_mode_asks_through_the_tracer(guard: Guard) -> None:
    pytest.importorskip("bfcl_eval")
    from agentkit.eval.bfcl import load_suite
    from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
    from agentkit.eval.bfcl.toolset import find_item
    from agentkit.testing import FunctionModel

    from tests._bfcl_oracle import PromptOracle

    (item,) = [find_item(s.bfcl.item) for s in load_suite("bfcl:multi_turn_base", limit=1, seed=1)]
    (row,) = run_prompt_mode([item], FunctionModel(PromptOracle(item)))
    assert row["bfcl_valid"], row["bfcl_error"]
    assert guard.escaped == [] and len(guard.calls) == row["model_calls"] > 1
