"""The router's sentence-embedding signal from weights shipped in a wheel
(``planner.router_embedder: "wordllama"``, the ``router`` extra): vectors built from the
installed package's files (nothing downloaded), a meaning the words do not share, and the
turn's route record naming the signal (scripted model; no model call for the vectors).
Without the extra, a routed turn goes on as with ``router_embedder: "model"`` and says so:
its route record and one log line name ``pip install 'agentkit[router]'``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from agentkit import MissingExtraError
from agentkit.config import PlannerConfig
from agentkit.planning import tool_choice
from agentkit.planning.state import TurnContext, UserMessage
from agentkit.planning.tool_semantics import semantic_scores, wordllama_embedder

from .conftest import run_cli
from .test_planner import KEY, Env, env, run
from .test_tool_choice import _semantic

__all__ = ["env"]  # the fixture, re-exported for pytest

needs_wordllama = pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None,
    reason="the router extra: pip install 'agentkit[router]'",
)
#: the route record's and the log's words when the extra is missing
MISSING = (
    "the router's sentence embedder (planner.router_embedder 'wordllama') needs the 'router' "
    "extra: pip install 'agentkit[router]'"
)

ROUTER = PlannerConfig(
    strategy="tool_loop", tool_choice="router", router_embedder="wordllama", max_steps=2
)


@needs_wordllama
def test_the_vectors_come_from_the_wheel_and_are_unit_length() -> None:
    embedder = wordllama_embedder()
    assert embedder is wordllama_embedder()  # loaded once per process
    vectors = embedder.vectors(["list my traders", "remove a trading bot", "列出交易员"])
    assert [len(v) for v in vectors] == [256, 256, 256]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in vectors)
    assert embedder.vectors([]) == []


@needs_wordllama
def test_meaning_ranks_the_right_tool_without_a_shared_word(env: Env) -> None:
    embedder = wordllama_embedder()
    scores = asyncio.run(semantic_scores(embedder, env.tools, "get rid of the bot", embedder.embed))
    assert max(scores, key=lambda name: scores[name]) == "delete_trader"


@needs_wordllama
def test_a_routed_turn_records_the_wordllama_signal(env: Env) -> None:
    script = {"route": ['{"tool": "none"}'], "act": ["Hello."], "respond": ["Hello."]}
    turn = env.turn("remind me what bots run", script, config=ROUTER)  # no word matches
    run(turn)
    semantic = [r.route for r in turn.records if r.route and r.route["stage"] == "semantic"]
    assert semantic and semantic[0]["reason"] == "semantic signal (wordllama)"
    assert all(r.purpose != "embeddings" for r in turn.records)  # no model call for vectors


# -- without the router extra ------------------------------------------------------------------


@pytest.fixture
def no_wordllama(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``router`` extra hidden from agentkit's extra check (``find_spec`` says None), and
    the process's one log line not yet written."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name.partition(".")[0] == "wordllama" else real(name, package)

    monkeypatch.setattr("agentkit._extras.importlib.util.find_spec", find_spec)
    monkeypatch.setattr(tool_choice, "_WARNED", [])


def _semantic_reasons(turn: TurnContext) -> list[str]:
    records = turn.records
    return [r.route["reason"] for r in records if r.route and r.route["stage"] == "semantic"]


def test_without_the_extra_the_embedder_is_a_typed_error(no_wordllama: None) -> None:
    with pytest.raises(MissingExtraError) as caught:
        wordllama_embedder()
    assert (caught.value.extra, caught.value.name, str(caught.value)) == (
        "router",
        "wordllama",
        MISSING,
    )


def test_without_the_extra_a_routed_turn_goes_on_by_words_and_says_so(
    env: Env, no_wordllama: None, caplog: pytest.LogCaptureFixture
) -> None:
    # no word matches: the model settles it, among every tool (no meaning to narrow them)
    script = {"route": ['{"tool": "none"}'], "act": ["Hello."], "respond": ["Hello."]}
    with caplog.at_level(logging.WARNING, logger="agentkit.planning"):
        turn = env.turn("remind me what bots run", script, config=ROUTER)
        run(turn)
        again = env.turn("remind me what bots run", script, config=ROUTER)
        run(again)
    assert _semantic_reasons(turn) == [f"{MISSING}; no semantic signal"]
    assert _semantic_reasons(again) == _semantic_reasons(turn)  # every turn's record says it
    settle = next(r for r in turn.records if r.route and r.route.get("vote_kind") == "settle")
    offered = settle.route["candidates"]
    assert [c["name"] for c in offered] == list(env.tools.names())
    assert all(c["semantic"] is None for c in offered)
    assert settle.route["decision"] == "none"
    warned = [r.getMessage() for r in caplog.records if r.name == "agentkit.planning"]
    assert warned == [f"{MISSING}; the router goes on with no semantic signal"]  # once


def test_without_the_extra_the_model_s_own_embeddings_stand_in(
    env: Env, no_wordllama: None
) -> None:
    axes = ["trader", "exchange", "preference", "bot"]
    votes = {"no tool is needed": -1.0, "Task:": -20.0}
    model = _semantic(axes, votes, {"act": [{"action": "answer", "text": "-"}]})
    turn = TurnContext(
        key=KEY,
        input=UserMessage("remind me what bots run"),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=env.tools,
        config=ROUTER,
    )
    run(turn)
    assert _semantic_reasons(turn) == [
        f"{MISSING}; the model's own embeddings instead",
        "semantic signal",
    ]
    assert model.embedded  # the request and the tools' texts, embedded by the model


def test_a_sample_agent_without_the_extra_still_answers(
    data_dir: Path, tmp_path: Path, no_wordllama: None, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"route": [{"tool": "none"}], "respond": ["Nothing planned."]}), encoding="utf-8"
    )
    args = ("--data-dir", str(data_dir), "send", "notes-001", "--model", f"scripted:{script}")
    with caplog.at_level(logging.WARNING, logger="agentkit.planning"):
        done = run_cli(*args, "anything on for my holiday?")
    assert (done.exit_code, done.stdout.strip()) == (0, "Nothing planned."), done.stderr
    assert [r.getMessage() for r in caplog.records if r.name == "agentkit.planning"] == [
        f"{MISSING}; the router goes on with no semantic signal"
    ]
