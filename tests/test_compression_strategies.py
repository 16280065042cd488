"""Compression strategies (model, extractive, hybrid) and grounding, on the shipped dialogues.

The summariser is a FunctionModel (it records every request); the dialogues are the shipped
scenario files, whose six known facts the strategies must keep at K=2.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentkit.calls.tracer import CallTracer
from agentkit.config import CompressionConfig
from agentkit.errors import ModelError
from agentkit.memory import TaskState, estimate_tokens, maybe_compress
from agentkit.memory.compression import CompressionOutcome, Summarize, update_memory
from agentkit.memory.extractive import extract_facts, latest_goal, select_facts, states_fact
from agentkit.memory.fidelity import fact_retention
from agentkit.memory.grounding import ground_facts, is_grounded
from agentkit.memory.sweep import ThresholdGrid, load_scenario, sweep_compression
from agentkit.models.base import ChatModel
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.planning.upkeep import summarizer
from agentkit.types import Message
from pydantic import ValidationError

SCENARIOS = Path(__file__).resolve().parent.parent / "data" / "scenarios" / "compression"
SHIPPED = sorted(SCENARIOS.glob("*.json"))
K2 = {"max_messages": 4, "token_threshold": 100, "keep_recent": 2}


def traced(model: ChatModel) -> Summarize:
    """The summarise call made through a call tracer of its own, as a sweep makes it."""
    return summarizer(CallTracer.standalone(model), model)


def _summariser(summary: dict[str, Any]) -> FunctionModel:
    return FunctionModel(lambda _request: summary, name="summariser")


WINDOWS: dict[Path, list[Message]] = {}


def _window(path: Path) -> list[Message]:
    """The scenario's window, made once (its message ids are new each time it is made)."""
    if path not in WINDOWS:
        WINDOWS[path] = load_scenario(path).window()
    return WINDOWS[path]


def _compress(
    path: Path, strategy: str, model: FunctionModel, **config: Any
) -> tuple[CompressionOutcome, tuple[str, ...]]:
    scenario = load_scenario(path)
    settings = CompressionConfig(**{**K2, "strategy": strategy, **config})
    outcome = asyncio.run(
        maybe_compress(
            _window(path),
            scenario.task_state(),
            model,
            settings,
            estimate_tokens,
            summarize=traced(model),
        )
    )
    assert outcome is not None and outcome.compressed, outcome
    return outcome, scenario.facts


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_extractive_keeps_the_six_facts_without_a_model_call(path: Path) -> None:
    model = _summariser({})
    outcome, facts = _compress(path, "extractive", model)
    assert model.requests == []
    kept = fact_retention(outcome.task_state, facts)
    # the one known loss: a Han-character place name in a sentence with nothing else a rule
    # can see (no number, date, Latin name or constraint word: "我们想去成都，看看大熊猫。")
    assert kept.lost == (("成都",) if path.stem == "family_trip_zh" else ()), kept
    assert outcome.strategy == "extractive" and outcome.event is not None
    assert outcome.event.strategy == "extractive" and outcome.event.facts_ungrounded == 0
    state = outcome.task_state
    assert state.current_goal  # from the latest request that states one
    # every fact remembers the message it came from
    window_ids = {m.message_id for m in _window(path)[:-2] if m.role == "user"}
    sources = {source.fact: source.message_ids for source in state.fact_sources}
    assert set(sources) == set(state.important_facts)
    assert all(ids and set(ids) <= window_ids for ids in sources.values())
    # questions, chit-chat and the assistant's words are not facts
    assert not any(fact.endswith(("?", "？")) for fact in state.important_facts)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_model_strategy_keeps_what_the_model_wrote_if_grounded(path: Path) -> None:
    scenario = load_scenario(path)
    said = scenario.facts[:2]  # two real facts, and an invented one
    invented = "the user lives in Berlin" if scenario.language == "en" else "用户住在北京"
    model = _summariser({"current_goal": "plan", "important_facts": [*said, invented]})
    outcome, facts = _compress(path, "model", model)
    assert [r.purpose for r in model.requests] == ["summarize"]
    assert outcome.task_state.important_facts == said
    assert outcome.ungrounded == (invented,) and outcome.event is not None
    assert outcome.event.facts_ungrounded == 1
    assert len(fact_retention(outcome.task_state, facts).kept) == 2


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_hybrid_takes_the_models_goal_and_the_extracted_and_grounded_facts(path: Path) -> None:
    scenario = load_scenario(path)
    invented = "budget 99,999 EUR"  # a number the dialogue never said
    summary = {
        "current_goal": "finish the setup",
        "active_flow": "onboarding",
        "open_loops": ["the user still wants to finish the setup"],
        "important_facts": [scenario.facts[0], invented],
        "last_decision": {"action": "wait for the user", "reason": "asked to"},
    }
    model = _summariser(summary)
    outcome, facts = _compress(path, "hybrid", model)
    state = outcome.task_state
    assert (state.current_goal, state.active_flow) == ("finish the setup", "onboarding")
    assert state.open_loops == ("the user still wants to finish the setup",)
    assert state.last_decision is not None and state.last_decision.action == "wait for the user"
    assert fact_retention(state, facts).lost == ()
    assert invented not in state.important_facts and outcome.ungrounded == (invented,)
    assert state.pinned_facts == scenario.pinned_facts


def test_hybrid_keeps_its_extractive_part_when_the_model_fails() -> None:
    def broken(_request: ModelRequest) -> Any:
        raise ModelError("function:broken", "the backend is down")

    outcome, facts = _compress(SHIPPED[0], "hybrid", FunctionModel(broken))
    assert outcome.warning and "down" in outcome.warning
    assert fact_retention(outcome.task_state, facts).lost == ()
    model = FunctionModel(broken)
    model_outcome = asyncio.run(
        maybe_compress(
            load_scenario(SHIPPED[0]).window(), TaskState(), model,
            CompressionConfig(**K2, strategy="model"), estimate_tokens, summarize=traced(model),
        )
    )  # fmt: skip
    assert model_outcome is not None and not model_outcome.compressed  # model: nothing changes


def test_the_fact_count_and_the_token_budget_are_held() -> None:
    for path in SHIPPED:
        outcome, _facts = _compress(path, "extractive", _summariser({}), max_facts=3)
        assert len(outcome.task_state.important_facts) == 3
        outcome, _facts = _compress(path, "extractive", _summariser({}), fact_tokens=40)
        spent = sum(estimate_tokens(fact) for fact in outcome.task_state.important_facts)
        assert 0 < spent <= 40
    # past the bound the oldest facts go first
    state = TaskState(important_facts=("the office is in Porto",))
    window = [Message.user("The budget is 500 EUR."), Message.user("We must ship by May 3.")]
    extracted = extract_facts(window)
    kept = select_facts([], extracted, max_facts=1, max_tokens=100, estimate=estimate_tokens)
    assert [fact.text for fact in kept] == ["We must ship by May 3"]
    assert state.important_facts  # the starting state is never changed


def test_secrets_are_never_kept_and_keys_are_masked() -> None:
    window = [
        Message.user("My OKX api key is sk-live-0123456789abcdefgh, keep it."),
        Message.user("The password is Hunter2Hunter2."),
        Message.user(
            "Use the token 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        ),
        Message.user("The budget is 3000 USDT."),
    ]
    facts = [fact.text for fact in extract_facts(window, scrub=lambda t: t.replace("Hunter2", ""))]
    text = " ".join(facts)
    assert "sk-live-0123456789abcdefgh" not in text and "Hunter2" not in text
    assert "9f86d081884c7d659a2feaa0" not in text
    assert "The budget is 3000 USDT" in facts
    assert all("password" not in fact.lower() and "api key" not in fact.lower() for fact in facts)


def test_what_counts_as_a_stated_fact() -> None:
    assert states_fact("The launch is on March 14.")
    assert states_fact("We never deploy on Fridays.")
    assert states_fact("I prefer short answers.")
    assert states_fact("Maria leads engineering.")
    assert states_fact('Call the project "Bluebird".')
    assert states_fact("预算是 3000 USDT。")
    assert states_fact("别用杠杆。") and states_fact("我喜欢简短的回答。")
    assert not states_fact("What's the weather like in Lisbon?")
    assert not states_fact("今天行情怎么样？")
    assert not states_fact("Great, keep it short.")
    window = [Message.user("Hi, I need help planning the launch."), Message.user("Thanks.")]
    assert latest_goal(window) == "I need help planning the launch"
    assert latest_goal([Message.user("ok")]) == ""


def test_the_grounding_rule() -> None:
    source = (
        "User: The launch event is on March 14 in Lisbon.\n"
        "User: The whole launch budget is 12,000 EUR.\n"
        "User: 最大回撤不能超过 10%，只做 BTC 和 ETH。"
    )
    assert is_grounded("launch on March 14 in Lisbon", source)
    assert is_grounded("launched in Lisbon", source)  # one stem: launch, launched
    assert is_grounded("budget 12000 EUR", source)  # thousands separators do not matter
    assert not is_grounded("budget 15,000 EUR", source)  # a number it never said
    assert not is_grounded("the user lives in Berlin", source)
    assert is_grounded("最大回撤 10%", source)
    assert is_grounded("只交易 BTC、ETH", source) is False  # 交易 is not in this source
    assert not is_grounded("用户住在北京", source)
    assert not is_grounded("...", source)  # nothing to check: not grounded
    grounding = ground_facts(["old fact", "Lisbon"], source, known=["OLD FACT"])
    assert grounding.kept == ("old fact", "Lisbon") and grounding.dropped == ()


def test_the_incremental_update_uses_the_strategy_and_grounds_the_model() -> None:
    said = Message.user("We must stay on Postgres.")
    window = [said, Message.assistant("Noted: Postgres.", message_id=said.message_id)]
    config = CompressionConfig(strategy="extractive")
    model = _summariser({"important_facts": ["uses MySQL"]})
    folded = asyncio.run(
        update_memory(window, TaskState(), model, 4, config=config, summarize=traced(model))
    )
    assert model.requests == [] and folded.task_state.important_facts == (
        "We must stay on Postgres",
    )
    folded = asyncio.run(
        update_memory(
            window,
            TaskState(),
            model,
            4,
            config=CompressionConfig(strategy="model"),
            summarize=traced(model),
        )
    )
    assert folded.ungrounded == ("uses MySQL",) and folded.task_state.important_facts == ()


def test_the_sweep_has_a_strategy_axis_and_counts_ungrounded_facts() -> None:
    path = SHIPPED[0]
    scenario = load_scenario(path)
    model = _summariser({"important_facts": [scenario.facts[0], "the user lives in Berlin"]})
    grid = ThresholdGrid([4], [100], [2, 6], ["model", "extractive", "hybrid"])
    rows = asyncio.run(
        sweep_compression(
            scenario.window(), scenario.task_state(), model, grid, facts=scenario.facts,
            estimate=estimate_tokens,
        )
    )  # fmt: skip
    assert [(r.strategy, r.keep_recent) for r in rows] == [
        ("model", 2), ("model", 6), ("extractive", 2), ("extractive", 6),
        ("hybrid", 2), ("hybrid", 6),
    ]  # fmt: skip
    assert len(model.requests) == 4  # model and hybrid, one per cut; extractive none
    by = {(r.strategy, r.keep_recent): r for r in rows}
    assert by["model", 2].facts_ungrounded == 1 and by["extractive", 2].facts_ungrounded == 0
    assert by["extractive", 2].facts_in_state == 6 and by["hybrid", 2].facts_in_state == 6
    record = by["hybrid", 2].as_record()
    assert record["strategy"] == "hybrid" and record["facts_ungrounded"] == 1
    assert record["state_tokens"] > 0
    with pytest.raises(Exception, match="strategy"):
        ThresholdGrid([4], [100], [2], ["magic"])


def test_a_bad_strategy_in_config_is_refused() -> None:
    with pytest.raises(ValidationError):
        CompressionConfig(strategy="magic")  # type: ignore[arg-type]


def test_the_strategy_is_an_eval_grid_axis_with_its_columns(data_dir: Path) -> None:
    from agentkit.eval import load_scenario as load_eval_scenario
    from agentkit.eval import run_eval

    scenario = load_eval_scenario(
        Path(__file__).resolve().parent.parent / "data/scenarios/memory_compression_facts_en.yaml"
    )
    frame = run_eval(
        [scenario],
        model="scripted",
        grid={"compression.strategy": ["model", "extractive"]},
        data_dir=data_dir,
        progress=False,
    )
    by = {row["compression.strategy"]: row for row in frame.to_dict("records")}
    assert set(by) == {"model", "extractive"}
    assert by["model"]["compression_strategy"] == "model"
    assert by["extractive"]["compression_strategy"] == "extractive"
    assert by["model"]["fact_retention"] == 0.75  # the scripted summary keeps three of four
    # the rule keeps the three said in the summarised part (the fourth is in the kept window)
    assert by["extractive"]["fact_retention"] == 0.75
    assert by["model"]["compressions"] == by["extractive"]["compressions"] == 1
    assert {by["model"]["facts_ungrounded"], by["extractive"]["facts_ungrounded"]} == {0}
