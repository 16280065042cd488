"""Grounded arguments (``agentkit.planning.grounding``): before a side-effecting call is
proposed each required argument must have been said by the user, returned by an earlier tool
or be a default the tool declares; otherwise the user is asked — in every strategy. Schema
fragments and placeholders are never grounded. (FunctionModel doubles; the desk's tools.)"""

from __future__ import annotations

from typing import Any

import pytest
from agentkit import FunctionModel, ModelRequest, language
from agentkit.config import PlannerConfig
from agentkit.events import AskUserEvent, ToolCallEvent
from agentkit.models.function import tool_call
from agentkit.planning import TurnContext
from agentkit.planning.answers import fill_from_answer
from agentkit.planning.grounding import INTENT, Sources, check, is_fragment, is_placeholder
from agentkit.planning.state import UserMessage
from agentkit.tools import Tool, ToolRegistry
from agentkit.tools.registry import schema_args_model

from .test_planner import KEY, Env, env, of, run, seed_desk, step

__all__ = ["env"]  # the fixture, re-exported for pytest

API_KEY = "AKEY-0123456789abcd"
SECRET_KEY = "SKEY-9876543210wxyz"
#: what a small model wrote for notebook 02: the schema echoed back, brackets
ECHOED = {
    "exchange": "binance",
    "account_name": "{'minLength':1,'type':'string'}",
    "api_key": "][",
    "secret_key": "{'maxLength':500,'minLength':1,'type':'string','writeOnly':true}",
}
STRATEGIES = ("plan_replan", "next_step", "tool_loop")


def _tool(schema: dict[str, Any], side_effect: bool = True, name: str = "book") -> Tool[Any]:
    return Tool(
        name=name,
        description="Book a table.",
        args_model=schema_args_model(name, schema),
        handler=lambda args: {"ok": True},
        side_effect=side_effect,
        live_state=False,
    )


BOOK = _tool({
    "type": "object",
    "properties": {
        "restaurant": {"type": "string"},
        "people": {"type": "integer"},
        "seating": {"type": "string", "default": "inside"},
        "window": {"type": "boolean"},
        "note": {"type": "string"},
    },
    "required": ["restaurant", "people", "seating"],
})  # fmt: skip


# -- the rule, value by value ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "{'minLength':1,'type':'string'}",
        '{"type": "string", "minLength": 1}',
        "][",
        "{}",
        "[]",
        "  ",
        "string",
        "integer",
        "'type': 'string'",
    ],
)
def test_schema_fragments_are_fragments(value: str) -> None:
    assert is_fragment(value)


@pytest.mark.parametrize("value", ["main", "Binance", "trader-1", "{main}x", "2026-12-03", "42"])
def test_values_are_not_fragments(value: str) -> None:
    assert not is_fragment(value)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("<account name>", "account_name"),
        ("{account_name}", "account_name"),
        ("${API_KEY}", "api_key"),
        ("your_api_key", "api_key"),
        ("YOUR API KEY", "api_key"),
        ("account_name", "account_name"),
        ("Account Name", "account_name"),
        ("xxx", "secret"),
        ("...", "secret"),
        ("TBD", "name"),
        ("example", "name"),
        ("****", "api_key"),
    ],
)
def test_placeholders_are_placeholders(value: str, name: str) -> None:
    assert is_placeholder(value, name)


def test_a_real_value_is_no_placeholder() -> None:
    assert not is_placeholder("main", "account_name")
    assert not is_placeholder("Trattoria Roma", "restaurant")


def test_a_value_the_user_said_is_grounded_and_an_invented_one_is_not() -> None:
    said = Sources(user=("Book Trattoria Roma for 4 people, please",))
    checked = check(BOOK, {"restaurant": "trattoria roma", "people": 4, "seating": "inside"}, said)
    assert checked.missing == ()
    invented = check(BOOK, {"restaurant": "Luigi's", "people": 2, "seating": "inside"}, said)
    assert invented.missing == ("restaurant", "people")  # neither was said


def test_a_value_an_earlier_tool_returned_is_grounded() -> None:
    found = Sources(user=("book the place you found for 4",), tools=('{"name": "Osteria Blu"}',))
    assert check(BOOK, {"restaurant": "Osteria Blu", "people": 4}, found).missing == ()


def test_a_declared_default_grounds_a_required_argument_given_or_left_out() -> None:
    said = Sources(user=("a table at Roma for 2",))
    assert check(BOOK, {"restaurant": "Roma", "people": 2, "seating": "inside"}, said).missing == ()
    assert check(BOOK, {"restaurant": "Roma", "people": 2}, said).missing == ()
    outside = check(BOOK, {"restaurant": "Roma", "people": 2, "seating": "terrace"}, said)
    assert outside.missing == ("seating",)  # not the default, and nobody said it


def test_a_fragment_or_placeholder_is_grounded_only_when_the_user_typed_it() -> None:
    said = Sources(user=("a table for 2, somewhere nice",))
    checked = check(BOOK, {"restaurant": "string", "people": 2, "seating": "][", "note": "x"}, said)
    assert checked.missing == ("restaurant", "seating")
    checked = check(BOOK, {"restaurant": "<restaurant>", "people": 2}, said)
    assert checked.missing == ("restaurant",)
    typed = Sources(user=("book string for 2, seating ][ please",))  # the user's own words win
    checked = check(BOOK, {"restaurant": "string", "people": 2, "seating": "]["}, typed)
    assert checked.missing == ()


def test_an_optional_placeholder_is_dropped_and_a_choice_is_kept() -> None:
    said = Sources(user=("Roma for 2",))
    checked = check(
        BOOK, {"restaurant": "Roma", "people": 2, "note": "<note>", "window": True}, said
    )
    assert checked.missing == ()
    assert checked.dropped == ("note",)
    assert checked.args == {"restaurant": "Roma", "people": 2, "window": True}


def test_numbers_are_grounded_as_numbers_and_words_need_their_boundaries() -> None:
    said = Sources(user=("we are 1,200 guests at Roma",))
    assert check(BOOK, {"restaurant": "Roma", "people": 1200}, said).missing == ()
    assert check(BOOK, {"restaurant": "Rom", "people": 12}, said).missing == (
        "restaurant",
        "people",
    )


def test_the_answer_fills_one_field_whole_and_several_by_their_labels() -> None:
    one = fill_from_answer(BOOK, {"restaurant": "Roma"}, ["people"], "4.")
    assert one == {"restaurant": "Roma", "people": 4}
    tool = _desk_tool("create_exchange_config")
    filled = fill_from_answer(
        tool,
        {"exchange": "binance"},
        ["account_name", "api_key", "secret_key"],
        f"account main, key {API_KEY} secret: {SECRET_KEY}",
    )
    assert filled == {
        "exchange": "binance",
        "account_name": "main",
        "api_key": API_KEY,
        "secret_key": SECRET_KEY,
    }
    partial = fill_from_answer(tool, {}, ["account_name", "api_key"], f"key={API_KEY}")
    assert partial == {"api_key": API_KEY}  # the account's name was not given: asked again


def test_the_question_names_the_fields_in_the_conversations_language() -> None:
    tool = _desk_tool("create_exchange_config")
    asked = language.ask_arguments(tool.name, tool.description, ["api_key", "secret_key"], "en")
    assert "create_exchange_config" in asked and "api key and secret key" in asked
    assert asked.endswith("What should I use?")
    zh = language.ask_arguments(tool.name, "", ["api_key"], "zh")
    assert "api key" in zh and "请告诉我" in zh


def _desk_tool(name: str) -> Tool[Any]:
    from pathlib import Path
    from tempfile import mkdtemp

    from agentkit_desk import desk_tools, open_desk

    db = open_desk(Path(mkdtemp()) / "ws")
    return desk_tools(db).get(name)


# -- in the planner, every strategy ------------------------------------------------------------


def _model(args: dict[str, Any], tool: str = "create_exchange_config") -> FunctionModel:
    """A model that proposes *tool* with *args* once, then finishes; it answers "Done."."""
    seen: dict[str, int] = {}

    def reply(request: ModelRequest) -> Any:
        purpose = request.purpose
        seen[purpose] = seen.get(purpose, 0) + 1
        first = seen[purpose] == 1
        if purpose == "plan":
            steps = [step("c1", "tool", tool_name=tool, tool_args=args)] if first else []
            return {"goal": "connect", "steps": steps}
        if purpose == "act":
            return tool_call(tool, **args) if first else "Done."
        if purpose == "replan":
            return {"action": "finish", "reason": "connected"}
        return "Done."

    return FunctionModel(reply)


def _turn(env: Env, text: str, model: FunctionModel, strategy: str) -> TurnContext:
    return TurnContext(
        key=KEY,
        input=UserMessage(text),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=env.tools,
        config=PlannerConfig(strategy=strategy),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_echoed_schema_becomes_a_question_then_the_answer_fills_the_call(
    env: Env, strategy: str
) -> None:
    model = _model(ECHOED)
    events = run(_turn(env, "Connect my Binance account", model, strategy))
    [asked] = of(events, AskUserEvent)
    assert asked.kind == "question"  # a question, never a consent showing the schema
    assert "account name, api key and secret key" in asked.question
    assert not [e for e in of(events, ToolCallEvent) if not e.id.startswith("live-")]
    state = env.state()
    assert state is not None and state.status == "waiting_user"
    assert state.waiting is not None and state.waiting.intent == INTENT
    assert state.waiting.pending_fields == ("account_name", "api_key", "secret_key")
    assert env.db.exchange_configs() == []

    calls = len(model.requests)
    answer = f"account main, key {API_KEY} secret {SECRET_KEY}"
    events = run(_turn(env, answer, model, strategy))
    [consent] = of(events, AskUserEvent)
    assert consent.kind == "confirmation" and consent.tool_name == "create_exchange_config"
    assert (
        consent.tool_args["account_name"] == "main" and consent.tool_args["exchange"] == "binance"
    )
    assert consent.tool_args["api_key"] == "****abcd"  # masked as ever
    assert len(model.requests) == calls  # the answer went back to the call: no model call

    run(_turn(env, "yes", model, strategy))
    [account] = env.db.exchange_configs()
    assert (account.account_name, account.api_key, account.secret_key) == (
        "main",
        API_KEY,
        SECRET_KEY,
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_answer_missing_a_field_is_asked_again_for_that_field(env: Env, strategy: str) -> None:
    model = _model(ECHOED)
    run(_turn(env, "Connect my Binance account", model, strategy))
    events = run(_turn(env, f"key {API_KEY} secret {SECRET_KEY}", model, strategy))
    [asked] = of(events, AskUserEvent)
    assert asked.kind == "question" and "account name" in asked.question
    assert "api key" not in asked.question
    state = env.state()
    assert state is not None and state.waiting is not None
    assert state.waiting.pending_fields == ("account_name",)
    events = run(_turn(env, "main", model, strategy))
    [consent] = of(events, AskUserEvent)
    assert consent.kind == "confirmation" and consent.tool_args["account_name"] == "main"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_grounded_values_go_straight_to_consent(env: Env, strategy: str) -> None:
    args = {"exchange": "okx", "account_name": "main", "api_key": API_KEY, "secret_key": SECRET_KEY}
    said = f"add my okx account main with key {API_KEY} and secret {SECRET_KEY}"
    events = run(_turn(env, said, _model(args), strategy))
    [consent] = of(events, AskUserEvent)
    assert consent.kind == "confirmation"


def test_an_id_returned_by_an_earlier_tool_is_grounded(env: Env) -> None:
    seed_desk(env.workspace)
    args = {"name": "Beta", "exchange_id": "ex-1", "model_id": "model-1"}
    plan = {
        "goal": "a trader",
        "steps": [
            step("r1", "tool", tool_name="get_exchange_configs"),
            step("r2", "tool", tool_name="get_model_configs"),
            step("c1", "tool", tool_name="create_trader", tool_args=args),
        ],
    }

    def reply(request: ModelRequest) -> Any:
        if request.purpose == "plan":
            return plan
        return {"action": "continue"}

    events = run(
        _turn(env, "create a trader Beta on my exchange", FunctionModel(reply), "plan_replan")
    )
    [consent] = of(events, AskUserEvent)
    assert consent.kind == "confirmation" and consent.tool_args == args


def test_without_the_read_the_same_ids_are_asked_for(env: Env) -> None:
    seed_desk(env.workspace)
    args = {"name": "Beta", "exchange_id": "ex-1", "model_id": "model-1"}
    model = _model(args, tool="create_trader")
    events = run(_turn(env, "create a trader Beta on my exchange", model, "plan_replan"))
    [asked] = of(events, AskUserEvent)
    assert asked.kind == "question" and "exchange id and model id" in asked.question


@pytest.mark.parametrize(("grounding", "asked"), [("all", True), ("side_effect", False)])
def test_grounding_all_checks_reads_too_and_side_effect_leaves_them(
    env: Env, grounding: str, asked: bool
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = ToolRegistry([_tool(schema, side_effect=False, name="weather")])

    def reply(request: ModelRequest) -> Any:
        return tool_call("weather", city="Paris") if len(model.requests) == 1 else "Sunny."

    model = FunctionModel(reply)
    turn = TurnContext(
        key=KEY,
        input=UserMessage("what is the weather like?"),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=tools,
        config=PlannerConfig(strategy="tool_loop", grounding=grounding),  # type: ignore[arg-type]
    )
    events = run(turn)
    questions = [e for e in of(events, AskUserEvent) if e.kind == "question"]
    assert bool(questions) is asked
    assert bool(of(events, ToolCallEvent)) is not asked
