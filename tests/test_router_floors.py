"""The router's meaning floors and its follow-up rule (scripted models, WordLlama's vectors).

* ``planner.router_min_similarity``: a tool the words pick (``calculate`` … ``height``) for a
  request that means something else is dropped, and with none left the turn is "no tool"
  without a model call; below the request's similarity it changes nothing.
* ``planner.router_settle_similarity``: a request no tool's words match goes to the model's
  settling vote only when a tool is that close in meaning.
* After the routed first call, ``tool_loop`` runs a further call only when the router would
  route it too: the same tool with a new value the user said (not the last one stretched or
  an option nobody asked for), or another tool the request's words pick.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest
from agentkit.config import PlannerConfig
from agentkit.events import ResultEvent, ToolCallEvent
from agentkit.memory import MemoryRepository
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import TurnContext
from agentkit.planning.grounding import Sources
from agentkit.planning.routes import one_value_one_argument
from agentkit.planning.state import UserMessage
from agentkit.planning.tool_semantics import semantic_signal, wordllama_embedder
from agentkit.store import ConversationKey, InMemoryConfigStore, InMemoryConversationStore
from agentkit.tools import ToolRegistry, tool

from .test_planner import of, run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None,
    reason="the router extra: pip install 'agentkit[router]'",
)

KEY = ConversationKey("floors-001", "conv-floors")


@tool
def body_mass_index(weight: float, height: float) -> dict[str, float]:
    """Calculate the body mass index of a person from their weight in kg and height in m."""
    return {"bmi": weight / (height * height)}


@tool
def humidity_forecast(location: str, days: int = 1) -> dict[str, Any]:
    """Get the humidity forecast of a location for the coming days."""
    return {"location": location, "days": days, "humidity": [70] * days}


@tool
def team_score(team_name: str) -> dict[str, str]:
    """Get the latest game score of a sports team."""
    return {"team": team_name, "score": "2-1"}


@tool
def top_banks(country: str, year: int, top_n: int = 5) -> dict[str, Any]:
    """List the banks of a country with the highest revenue in a year."""
    return {"country": country, "year": year, "banks": ["A", "B"][:top_n]}


def _registry() -> ToolRegistry:
    tools = (body_mass_index, humidity_forecast, team_score, top_banks)
    return ToolRegistry([function.bind() for function in tools])


def _turn(text: str, script: dict[str, list[Any]], **planner: Any) -> TurnContext:
    store = InMemoryConversationStore()
    store.create(KEY, "test")
    config = PlannerConfig(
        strategy="tool_loop", tool_choice="router", router_embedder="wordllama", **planner
    )
    return TurnContext(
        key=KEY,
        input=UserMessage(text),
        store=store,
        memory=MemoryRepository(InMemoryConfigStore()),
        model=ScriptedModel(script),
        tools=_registry(),
        config=config,
    )


def _similarity(text: str, name: str) -> float:
    embedder = wordllama_embedder()
    signal = asyncio.run(semantic_signal(embedder, _registry(), text, embedder.embed))
    return signal.similarities[name]


def _choices(turn: TurnContext) -> list[dict[str, Any]]:
    return [r.route for r in turn.records if r.route and r.route["stage"] == "choice"]


TRIANGLE = "Calculate the area of a triangle with a base of 10 meters and a height of 5 meters."


def test_a_word_match_that_means_something_else_is_no_tool_below_the_floor() -> None:
    close = _similarity(TRIANGLE, "body_mass_index")
    assert -1.0 < close < 0.9  # the words match ("calculate", "height"), the meaning less so
    floor = round(close + 0.05, 2)
    script: dict[str, list[Any]] = {"respond": ["I cannot compute a triangle's area here."]}
    turn = _turn(TRIANGLE, script, router_min_similarity=floor)
    events = run(turn)
    assert not of(events, ToolCallEvent)
    (choice,) = _choices(turn)
    assert choice["decision"] == "none"
    assert f"router_min_similarity {floor}" in choice["reason"]
    assert choice["candidates"][0]["name"] == "body_mass_index"
    assert choice["candidates"][0]["similarity"] == pytest.approx(close, abs=1e-3)
    assert [r.purpose for r in turn.records if r.messages] == ["respond"]  # no route call


def test_below_the_requests_similarity_the_floor_changes_nothing() -> None:
    close = _similarity(TRIANGLE, "body_mass_index")
    script: dict[str, list[Any]] = {
        "route": [{"weight": 10, "height": 5}],
        "act": ["Done."],
    }
    turn = _turn(TRIANGLE, script, router_min_similarity=round(close - 0.05, 2))
    events = run(turn)
    (call,) = of(events, ToolCallEvent)
    assert call.name == "body_mass_index"


def test_a_request_no_tool_is_close_to_is_not_put_to_the_models_vote() -> None:
    text = "Share a good recipe for a vegan lasagna."
    script: dict[str, list[Any]] = {"respond": ["Here is one: …"]}
    turn = _turn(text, script, router_settle_similarity=0.95)
    events = run(turn)
    assert not of(events, ToolCallEvent)
    (choice,) = _choices(turn)
    assert choice["decision"] == "none"
    assert "router_settle_similarity 0.95" in choice["reason"]
    assert all(r.purpose != "route" or not r.messages for r in turn.records)  # no vote


MIAMI = "What will the humidity be in Miami, Florida over the next 7 days?"


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A native tool call, as the scripted model answers one (it has function calling)."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _loop_turn(text: str, acts: list[Any], first: dict[str, Any]) -> TurnContext:
    script: dict[str, list[Any]] = {
        "route": [first],
        "act": acts,
        "respond": ["Here is the forecast."],
    }
    return _turn(text, script)


def _notes(turn: TurnContext) -> list[str]:
    state = turn.memory.load_execution_state(KEY.agent_id, KEY.conversation_id)
    assert state is not None
    return [o.content for o in state.value.observations if o.kind == "note"]


def _calls(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.arguments)) for e in of(events, ToolCallEvent)]


def test_the_same_call_stretched_is_not_run_again() -> None:
    stretched = {"location": "Miami, Florida over the next 7", "days": 7}
    acts: list[Any] = [_call("humidity_forecast", stretched)]
    turn = _loop_turn(MIAMI, acts, {"location": "Miami, Florida", "days": 7})
    events = run(turn)
    assert _calls(events) == [("humidity_forecast", {"location": "Miami, Florida", "days": 7})]
    assert isinstance(events[-1], ResultEvent)
    assert any("no new value the user said" in note for note in _notes(turn))


def test_another_tool_the_words_do_not_pick_is_not_run() -> None:
    acts: list[Any] = [_call("team_score", {"team_name": "Miami"})]
    turn = _loop_turn(MIAMI, acts, {"location": "Miami, Florida", "days": 7})
    events = run(turn)
    assert [name for name, _ in _calls(events)] == ["humidity_forecast"]
    assert any("team_score is not a tool the request's words pick" in note for note in _notes(turn))


def test_a_new_value_the_user_said_still_gets_its_own_call() -> None:
    text = "What will the humidity be in Miami and in Boston over the next 3 days?"
    acts: list[Any] = [_call("humidity_forecast", {"location": "Boston"}), "Both are humid."]
    events = run(_loop_turn(text, acts, {"location": "Miami", "days": 3}))
    assert [args["location"] for _, args in _calls(events)] == ["Miami", "Boston"]


def test_an_option_nobody_asked_for_is_no_new_value() -> None:
    acts: list[Any] = [_call("humidity_forecast", {"location": "Miami", "days": 2})]
    events = run(_loop_turn("Humidity in Miami?", acts, {"location": "Miami"}))
    assert len(_calls(events)) == 1  # 2 was never said


def test_a_scaled_number_is_said_both_ways() -> None:
    said = Sources(user=("a total payout of $50 million over 2 thousand shares",)).said()
    assert {50.0, 50_000_000.0, 2.0, 2_000.0} <= set(said.numbers)
    assert 5.0 not in said.numbers  # only what was said


def test_an_optional_argument_holding_another_arguments_value_is_dropped() -> None:
    text = "Which banks of the U.S had the highest revenue in 2020?"
    script: dict[str, list[Any]] = {
        "route": [{"country": "U.S", "year": 2020, "top_n": 2020}],
        "act": ["These two."],
    }
    turn = _turn(text, script)
    events = run(turn)
    assert _calls(events) == [("top_banks", {"country": "U.S", "year": 2020})]  # top_n: its default
    (filled,) = [r.route for r in turn.records if r.route and r.route["stage"] == "arguments"]
    assert filled["reason"] == "dropped optional top_n: a value another argument holds"


def test_two_required_arguments_may_hold_the_same_value() -> None:
    args = {"weight": 5, "height": 5, "unit": 5}
    schema = {"required": ["weight", "height"]}
    assert one_value_one_argument(schema, args) == ({"weight": 5, "height": 5}, ("unit",))
