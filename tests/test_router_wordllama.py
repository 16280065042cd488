"""The router's sentence-embedding signal from weights shipped in a wheel
(``planner.router_embedder: "wordllama"``, the ``router`` extra): vectors built from the
installed package's files (nothing downloaded), a meaning the words do not share, and the
turn's route record naming the signal (scripted model; no model call for the vectors)."""

from __future__ import annotations

import asyncio
import math

import pytest
from agentkit.config import PlannerConfig
from agentkit.planning.tool_semantics import semantic_scores, wordllama_embedder

from .test_planner import Env, env, run

__all__ = ["env"]  # the fixture, re-exported for pytest

pytest.importorskip("wordllama", reason="the router extra: pip install 'agentkit[router]'")

ROUTER = PlannerConfig(
    strategy="tool_loop", tool_choice="router", router_embedder="wordllama", max_steps=2
)


def test_the_vectors_come_from_the_wheel_and_are_unit_length() -> None:
    embedder = wordllama_embedder()
    assert embedder is wordllama_embedder()  # loaded once per process
    vectors = embedder.vectors(["list my traders", "remove a trading bot", "列出交易员"])
    assert [len(v) for v in vectors] == [256, 256, 256]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in vectors)
    assert embedder.vectors([]) == []


def test_meaning_ranks_the_right_tool_without_a_shared_word(env: Env) -> None:
    embedder = wordllama_embedder()
    scores = asyncio.run(semantic_scores(embedder, env.tools, "get rid of the bot", embedder.embed))
    assert max(scores, key=lambda name: scores[name]) == "delete_trader"


def test_a_routed_turn_records_the_wordllama_signal(env: Env) -> None:
    script = {"route": ['{"tool": "none"}'], "act": ["Hello."], "respond": ["Hello."]}
    turn = env.turn("remind me what bots run", script, config=ROUTER)  # no word matches
    run(turn)
    semantic = [r.route for r in turn.records if r.route and r.route["stage"] == "semantic"]
    assert semantic and semantic[0]["reason"] == "semantic signal (wordllama)"
    assert all(r.purpose != "embeddings" for r in turn.records)  # no model call for vectors
