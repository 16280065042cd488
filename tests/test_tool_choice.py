"""Issue 29: no shared word is not "no tool" (the model settles it, with a semantic signal),
reads stay reads in every strategy, and consent in the tool's own words — with scripted
models from the kit; the sample agents on the embedded model at the end."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agentkit.agent_folder import AgentFolder
from agentkit.config import PlannerConfig
from agentkit.events import AskUserEvent, PlanEvent
from agentkit.language import detect as conversation_language
from agentkit.models.scripted_signals import SignalScriptedModel
from agentkit.planning.consent import consent_question
from agentkit.planning.intents import is_small_talk
from agentkit.planning.reads import asks_nothing_to_change
from agentkit.planning.tool_semantics import SemanticIndex, semantic_index, tool_texts
from agentkit.testing import scripted_signals
from agentkit.tools import AgentTools, Tool, tool

from .test_planner import Env, env, of, run, step
from .test_router import ROUTED_LOOP, _NoArgs, first_tool_calls, route_records, scored_turn
from .test_toolsets import make_agent

__all__ = ["env"]  # the fixture, re-exported for pytest

REPO = Path(__file__).resolve().parents[1]


# -- small talk and "asks for nothing to change" --------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["hi there", "thank you, that's all", "who are you?", "nice to meet you", "你好呀", "谢谢",
     "你能做什么", "bye, see you later", "你好, 你能帮我做什么"],
)  # fmt: skip
def test_small_talk_is_recognised(text: str) -> None:
    assert is_small_talk(text)


@pytest.mark.parametrize(
    "text",
    ["hello, list my traders", "thanks, now delete note 2", "what can you do with my notes?",
     "remember to water the plants", "你好, 帮我删除笔记 2", ""],
)  # fmt: skip
def test_a_request_inside_small_talk_is_not_small_talk(text: str) -> None:
    assert not is_small_talk(text)


def test_what_asks_for_nothing_to_change() -> None:
    for text in ("what notes do I have?", "show my traders", "你好", "我有哪些笔记"):
        assert asks_nothing_to_change(text), text
    for text in ("delete note 2", "what notes do I have? delete the first", "jot this down"):
        assert not asks_nothing_to_change(text), text


# -- no shared word: the model settles it ----------------------------------------------------


def test_no_shared_word_is_settled_by_the_models_choice_not_no_tool(env: Env) -> None:
    text = "pull up the roster"  # shares no word with any desk tool
    script = {"route": [{"tool": "list_traders"}], "act": [{"action": "answer", "text": "-"}]}
    turn = env.turn(text, script, config=ROUTED_LOOP)
    events = run(turn)
    assert first_tool_calls(events) == ["list_traders"]
    (choice,) = route_records(turn.records)
    route = choice.route
    assert route["vote_kind"] == "settle" and route["decision"] == "tool"
    offered = [c["name"] for c in route["candidates"]]
    # no semantic signal from a scripted model: every tool is offered, and "none"
    assert sorted(offered) == sorted(env.tools.names())
    assert choice.schema_["properties"]["tool"]["enum"] == [*offered, "none"]


def test_the_model_may_settle_on_no_tool(env: Env) -> None:
    script = {"route": [{"tool": "none"}], "respond": ["Nothing to do."]}
    turn = env.turn("pull up the roster", script, config=ROUTED_LOOP)
    events = run(turn)
    assert not first_tool_calls(events) and not of(events, AskUserEvent)
    assert route_records(turn.records)[0].route["decision"] == "none"


def test_word_only_router_answers_no_shared_word_with_no_tool(env: Env) -> None:
    config = PlannerConfig(strategy="tool_loop", tool_choice="router", router_signals=("lexical",))
    turn = env.turn("pull up the roster", {"respond": ["-"]}, config=config)
    run(turn)
    (choice,) = route_records(turn.records)
    assert choice.messages == [] and choice.route["decision"] == "none"


def test_small_talk_needs_no_model_call_even_without_a_lexical_match(env: Env) -> None:
    turn = env.turn("nice to meet you", {"respond": ["Likewise!"]}, config=ROUTED_LOOP)
    events = run(turn)
    assert not first_tool_calls(events)
    assert [r.purpose for r in turn.records] == ["route", "respond"]
    assert turn.records[0].messages == [] and "small talk" in turn.records[0].route["reason"]


def test_a_read_with_no_shared_word_is_never_offered_a_write(env: Env) -> None:
    script = {"route": [{"tool": "none"}], "respond": ["-"]}
    turn = env.turn("what is on the roster?", script, config=ROUTED_LOOP)
    run(turn)
    (choice,) = route_records(turn.records)
    offered = choice.route["candidates"]
    assert offered and not any(c["side_effect"] for c in offered)


def _semantic(
    axes: Sequence[str],
    votes: dict[str, float],
    replies: dict[str, list[Any]],
    rewrite: Callable[[str], str] = lambda text: text,
) -> SignalScriptedModel:
    """The kit's scripted model with the embedded model's two signals: it embeds by keyword
    (one axis per word of *axes*, after *rewrite*) and scores by the prompt (*votes*: the
    log-probability of a prompt that holds the key)."""

    def embed(text: str) -> list[float]:
        seen = rewrite(text).casefold()
        raw = [1.0 if axis in seen else 0.0 for axis in axes] + [0.1]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]

    def score(prompt: str, _text: str) -> list[float]:
        return [next(v for k, v in votes.items() if k in prompt)]

    model = scripted_signals(replies, score=score, embed=embed)
    assert isinstance(model, SignalScriptedModel)
    return model


def test_meaning_picks_the_tools_the_likelihood_settles_among(env: Env) -> None:
    # "bot" is in no desk tool's words: the vectors say it is close to "trader"
    axes = ["trader", "exchange", "preference", "bot"]
    votes = {"Create a trader": -3.0, "no tool is needed": -9.0, "Task:": -20.0}
    model = _semantic(
        axes,
        votes,
        {"act": [{"action": "answer", "text": "-"}]},
        rewrite=lambda text: text.replace("bot", "trader bot"),
    )
    turn = scored_turn(env, "spin up a bot called Atlas", model)
    events = run(turn)
    asked = of(events, AskUserEvent) + of(events, PlanEvent)
    assert asked, "the settled write is proposed (consent comes next), not dropped"
    records = route_records(turn.records)
    assert records[0].route["stage"] == "semantic"
    choice = next(r for r in records if r.route.get("vote_kind") == "settle")
    offered = [c["name"] for c in choice.route["candidates"]]
    assert len(offered) == 3 and "create_trader" in offered  # the best three by meaning
    assert all(c["semantic"] is not None for c in choice.route["candidates"])
    assert choice.route["decided"] == "create_trader"
    assert len(model.pairs) == 4 and "no tool is needed" in model.pairs[-1][0]


def test_the_toolsets_vectors_are_computed_once_and_again_for_a_new_tool(env: Env) -> None:
    model = _semantic(["trader", "weather"], {}, {})
    first = asyncio.run(semantic_index(model, env.tools, model.embed))
    count = len(model.embedded)
    assert count == sum(len(tool_texts(env.tools.get(n))) for n in env.tools.names())
    assert asyncio.run(semantic_index(model, env.tools, model.embed)) is first
    assert len(model.embedded) == count  # cached
    env.tools.register(
        Tool(
            name="get_weather",
            description="Today's weather forecast.",
            args_model=_NoArgs,
            handler=lambda _: {},
            side_effect=False,
            live_state=False,
        )
    )
    again = asyncio.run(semantic_index(model, env.tools, model.embed))
    assert "get_weather" in again.names
    assert len(model.embedded) == count + 1  # only the new tool's text


def test_centring_leaves_what_tells_the_tools_apart() -> None:
    # raw vectors all point one way (as a small model's do): centred, the right one wins
    raw = [[1.0, 0.10, 0.0], [1.0, 0.0, 0.10]]
    index = SemanticIndex.build(["a", "b"], ["a", "b"], raw)
    scores = index.scores([1.0, 0.09, 0.0])
    assert scores["a"] > 0.9 and scores["b"] < 0


# -- reads stay reads, in every strategy ----------------------------------------------------


def test_a_plan_with_a_write_for_a_read_drops_the_write(env: Env) -> None:
    script = {
        "plan": [
            {
                "goal": "show traders",
                "steps": [
                    step("s1", "tool", tool_name="list_traders"),
                    step("s2", "tool", tool_name="delete_trader", tool_args={"trader_id": "t-1"}),
                    step("s3", "respond", instruction="answer"),
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": ["You have no traders."],
    }
    turn = env.turn("what traders do I have?", script)
    events = run(turn)
    (plan,) = of(events, PlanEvent)
    assert [s.tool_name for s in plan.steps if s.step_type == "tool"] == ["list_traders"]
    assert not of(events, AskUserEvent)
    state = env.state()
    assert state is not None and state.status == "completed"
    assert any("delete_trader" in o.content and "dropped" in o.content for o in state.observations)


def test_a_replan_with_a_write_for_a_read_drops_it(env: Env) -> None:
    script = {
        "plan": [{"goal": "g", "steps": [step("s1", "tool", tool_name="list_traders")]}],
        "replan": [
            {
                "action": "replace_remaining",
                "steps": [
                    step("s2", "tool", tool_name="delete_trader", tool_args={"trader_id": "t"})
                ],
            }
        ],
        "respond": ["-"],
    }
    events = run(env.turn("你好", script))
    assert not of(events, AskUserEvent)


def test_a_tool_loop_write_for_a_read_is_never_proposed(env: Env) -> None:
    script = {
        "act": [{"tool_calls": [{"name": "delete_trader", "arguments": {"trader_id": "t-1"}}]}],
        "respond": ["Here is what I know."],
    }
    config = PlannerConfig(strategy="tool_loop")
    events = run(env.turn("which traders do I have?", script, config=config))
    assert not of(events, AskUserEvent)
    state = env.state()
    assert state is not None and state.status == "completed"
    assert [s.status for s in state.steps if s.type == "tool"] == ["skipped"]


def test_a_request_that_says_a_change_still_gets_its_consent(env: Env) -> None:
    script = {
        "plan": [
            {
                "goal": "delete",
                "steps": [
                    step("s1", "tool", tool_name="delete_trader", tool_args={"trader_id": "t"})
                ],
            }
        ]
    }
    events = run(env.turn("delete trader t", script))
    (asked,) = of(events, AskUserEvent)
    assert asked.kind == "confirmation" and asked.tool_name == "delete_trader"


# -- consent in the tool's own words ---------------------------------------------------------


@tool(side_effect=True, consent="This erases the memo for good.")
def erase_memo(memo_id: int) -> dict[str, int]:
    """Erase a memo by its id."""
    return {"erased": memo_id}


@tool(side_effect=True)
def file_memo(title: str, api_key: str = "") -> dict[str, str]:
    """File a new memo in the archive."""
    return {"filed": title}


def test_the_consent_question_says_what_the_tool_does() -> None:
    said = consent_question("erase_memo", {"memo_id": 3}, erase_memo.bind())
    assert said.startswith('To continue I need to run erase_memo with {"memo_id": 3}.')
    assert "This erases the memo for good." in said and "Shall I go ahead?" in said
    fallback = consent_question("file_memo", {"title": "x", "api_key": "K9"}, file_memo.bind())
    assert "File a new memo in the archive." in fallback  # its description, without consent=
    assert "K9" not in fallback and "****" in fallback


def test_the_consent_question_speaks_the_conversations_language() -> None:
    assert conversation_language(["删掉第 2 条", "hello"]) == "zh"
    assert conversation_language(["2", "delete it"]) == "en"  # "2" has no language
    said = consent_question("erase_memo", {"memo_id": 3}, erase_memo.bind(), "zh")
    assert "erase_memo" in said and "This erases the memo for good." in said
    assert "要继续吗" in said


def test_a_toolset_entrys_flags_give_a_tool_its_consent_text(tmp_path: Path) -> None:
    files = {"memo.py": "from tests.test_tool_choice import erase_memo, file_memo\n"}
    flags = {"file_memo": {"consent": "This files the memo where everyone can read it."}}
    config = {"engine": "planner", "toolsets": [{"python": "memo.py", "flags": flags}]}
    make_agent(tmp_path, "m1", config, files)
    with AgentTools.load(AgentFolder.load(tmp_path, "m1")) as tools:
        assert tools.registry.get("file_memo").consent.startswith("This files the memo")
        assert tools.registry.get("erase_memo").consent == "This erases the memo for good."


def test_a_consent_asked_in_a_turn_names_the_tool_and_its_words(env: Env) -> None:
    script = {
        "plan": [
            {
                "goal": "delete",
                "steps": [
                    step("s1", "tool", tool_name="delete_trader", tool_args={"trader_id": "t"})
                ],
            }
        ]
    }
    (asked,) = of(run(env.turn("删除交易员 t", script)), AskUserEvent)
    assert "delete_trader" in asked.question and '"trader_id": "t"' in asked.question
    assert env.tools.get("delete_trader").description.rstrip(".") in asked.question
    assert "要继续吗" in asked.question and "configuration" not in asked.question


def test_the_sample_agents_consent_texts_are_their_own(tmp_path: Path) -> None:
    for agent in ("calendar-001",):
        with AgentTools.load(AgentFolder.load(REPO / "data", agent)) as tools:
            writes = [tools.registry.get(n) for n in tools.registry.names()]
            writes = [t for t in writes if t.side_effect]
            assert writes and all(t.consent for t in writes)
            for t in writes:
                said = consent_question(t.name, {}, t)
                assert t.consent in said and "configuration" not in said


# -- the sample agents on their default model -----------------------------------------------

SAMPLES = {
    "desk-001": ("show me my traders", "hello!"),
    "desk-local-001": ("which exchange accounts do I have?", "你好"),
    "notes-001": ("what notes do I have?", "thanks!"),
    "calendar-001": ("what's on my calendar?", "早上好"),
}


@pytest.mark.real_model
def test_every_sample_agent_behaves_on_its_default_model() -> None:
    """One read and one greeting to each sample agent with tools, on its own config and the
    embedded model (one worker process for all): no side-effecting tool is ever proposed."""
    from agentkit.eval.first_tool import FirstToolRow, FirstToolTable, run_first_tool

    tables = [
        FirstToolTable(
            kind="first_tool",
            id=agent,
            agent=agent,
            rows=tuple(
                FirstToolRow(text=text, expect="none", lang="zh" if ord(text[0]) > 127 else "en")
                for text in texts
            ),
        )
        for agent, texts in SAMPLES.items()
    ]
    rows = run_first_tool(tables, data_dir=REPO / "data", model="llama")
    assert len(rows) == 2 * len(SAMPLES)
    proposed = [(r["agent"], r["text"], r["action"]) for r in rows if r["side_effect"]]
    assert not proposed, f"side-effecting tools proposed for reads or greetings: {proposed}"
    assert not [r for r in rows if r["action"] == "error"], json.dumps(rows, indent=1)


@pytest.mark.real_model
def test_the_embedded_model_embeds_by_meaning() -> None:
    from agentkit.models.llama import LlamaModel

    model = LlamaModel()
    delete, remove, greet = asyncio.run(
        model.embed(["delete note 3", "remove note number 3", "good morning, how are you"])
    )
    assert len(delete) == len(greet) > 100
    assert abs(sum(x * x for x in delete) - 1.0) < 1e-3

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(delete, remove) > cosine(delete, greet)


def test_the_sample_agents_use_the_router_on_the_embedded_model() -> None:
    from agentkit.config import load_agent_config

    for agent in ("desk-001", "desk-local-001", "notes-001", "calendar-001"):
        planner = load_agent_config(REPO / "data" / "agents" / agent / "config.json").planner
        on_llama = planner.for_model("llama")
        assert (on_llama.strategy, on_llama.tool_choice) == ("tool_loop", "router"), agent
        # the sentence embedder measured better than the model's own vectors (router.md)
        assert on_llama.router_embedder == "wordllama", agent
    desk = load_agent_config(REPO / "data" / "agents" / "desk-001" / "config.json").planner
    # written for stronger models: another backend keeps its own strategy, no router
    assert desk.for_model("scripted:x.json").strategy == "plan_replan"
    assert desk.for_model("claude").tool_choice == "model"
    assert desk.for_model("llama:/models/other.gguf").stage_timeout_scale == 6
