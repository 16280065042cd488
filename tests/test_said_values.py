"""Argument values decoded from what was said (``planner.argument_values: said``): a free
string or number a tool argument may take is limited to the conversation's own values — runs
of the user's words, strings earlier tools returned, numbers said — in the schema every
strategy sends (and so in the embedded model's grammar). FunctionModel doubles; the real
grammar is built by llama-cpp-python."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.config import PlannerConfig
from agentkit.events import AskUserEvent, ToolCallEvent
from agentkit.models.function import tool_call
from agentkit.planning import TurnContext, act_schema, plan_schema
from agentkit.planning.grounding import Sources
from agentkit.planning.schemas import Said, replan_schema, tool_args_schema
from agentkit.planning.state import UserMessage
from agentkit.tools import Tool, ToolRegistry
from agentkit.tools.registry import schema_args_model

from .test_planner import KEY, Env, env, of, run, step

__all__ = ["env"]  # the fixture, re-exported for pytest

REQUEST = "Find restaurants within 10 miles that offer Chinese cuisine in Seattle."
FIND = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city, e.g. Seattle, WA"},
        "cuisine": {"type": "string"},
        "max_distance": {"type": "integer"},
        "price": {"type": "string", "enum": ["low", "high"]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["location", "cuisine"],
}


def _find_tool() -> Tool[Any]:
    return Tool(
        name="find_restaurants",
        description="Find restaurants nearby.",
        args_model=schema_args_model("find_restaurants", FIND),
        handler=lambda args: {"found": ["Golden Dragon"]},
        side_effect=False,
        live_state=False,
    )


TOOLS = ToolRegistry([_find_tool()])


# -- what was said ---------------------------------------------------------------------------


def test_the_values_said_are_runs_of_the_users_words_without_edge_punctuation() -> None:
    said = Sources(user=(REQUEST,)).said()
    assert "Seattle" in said.strings  # "Seattle." without its full stop
    assert "Chinese" in said.strings and "Chinese cuisine" in said.strings
    assert "restaurants within 10 miles that offer" in said.strings  # six words at most
    assert "restaurants within 10 miles that offer Chinese" not in said.strings
    # no value starts or ends with a function word
    assert "10 miles" in said.strings and "within 10 miles" not in said.strings
    assert "Find restaurants within" not in said.strings
    assert said.numbers == (10.0,)
    assert said.strings[0] == "Find"  # the user's words first, in order
    assert len(said.strings) == len(set(said.strings))


def test_a_possessive_is_offered_without_its_s_too() -> None:
    said = Sources(user=("What was Albert Einstein's main contribution?",)).said()
    assert {"Albert Einstein's", "Albert Einstein", "Einstein"} <= set(said.strings)


def test_tool_results_give_their_strings_and_number_words_count_as_numbers() -> None:
    result = json.dumps({"files": ["report.txt", "notes.md"], "size": 2048, "owner": "ana"})
    said = Sources(user=("open the first two files",), tools=(result, "ok")).said()
    assert {"report.txt", "notes.md", "ana", "ok"} <= set(said.strings)
    assert '{"files"' not in " ".join(said.strings)  # the JSON's strings, not its text
    assert {2.0, 2048.0} <= set(said.numbers)


def test_han_text_gives_runs_of_characters() -> None:
    said = Sources(user=("查询上海的天气",)).said()
    assert "上海" in said.strings and "查询上海的天气" in said.strings


def test_the_values_offered_are_capped() -> None:
    long = " ".join(f"word{i}" for i in range(400))
    said = Sources(user=(long,)).said()
    assert len(said.strings) == 600
    assert said.strings[0] == "word0"


# -- the schema ------------------------------------------------------------------------------


def test_free_strings_and_numbers_take_values_said_and_declared_choices_stay() -> None:
    said = Said(strings=("Seattle", "Chinese"), numbers=(10.0, 2.5))
    schema = tool_args_schema(FIND, said)
    props = schema["properties"]
    assert props["location"] == {"$ref": "#/$defs/said_string"}
    assert props["cuisine"] == {"$ref": "#/$defs/said_string"}
    assert props["max_distance"] == {"enum": [10]}  # an integer: the whole numbers said
    assert props["price"] == {"enum": ["low", "high"]}  # the tool's own choices
    assert props["zip"]["pattern"] == "^[0-9]{5}$"  # a pattern is the tool's rule
    assert props["tags"]["items"] == {"$ref": "#/$defs/said_string"}
    assert schema["$defs"]["said_string"] == {"enum": ["Seattle", "Chinese"]}
    assert schema["required"] == ["location", "cuisine"]


def test_a_choice_the_user_named_is_the_only_one_offered() -> None:
    named = tool_args_schema(FIND, Said(strings=("Seattle", "HIGH end"), numbers=()))
    assert named["properties"]["price"] == {"enum": ["low", "high"]}  # a span, not the choice
    named = tool_args_schema(FIND, Said(strings=("Seattle", "High"), numbers=()))
    assert named["properties"]["price"] == {"enum": ["high"]}  # case aside
    facilities = {
        "type": "array",
        "items": {"type": "string", "enum": ["Wi-Fi", "Cafe", "Fiction"]},
    }
    schema = {"type": "object", "properties": {"has": facilities}, "required": ["has"]}
    said = Said(strings=("fiction section", "fiction", "free Wi-Fi", "Wi-Fi"))
    has = tool_args_schema(schema, said)["properties"]["has"]
    assert has == {"type": "array", "items": {"enum": ["Wi-Fi", "Fiction"]}, "minItems": 1}


def test_an_optional_free_text_argument_is_offered_only_when_the_request_names_it() -> None:
    said = Sources(user=("Find Chinese restaurants in Seattle within 5 miles, tags vegan",)).said()
    props = tool_args_schema(FIND, said)["properties"]
    assert set(props) == {"location", "cuisine", "max_distance", "price", "zip", "tags"}
    unnamed = Sources(user=("Find Chinese restaurants in Seattle",)).said()
    props = tool_args_schema(FIND, unnamed)["properties"]
    assert "tags" not in props  # optional free text the request does not name
    assert "max_distance" not in props  # an optional number, and no number was said
    assert {"location", "cuisine"} <= set(props)  # required: always offered
    assert {"price", "zip"} <= set(props)  # a choice, a pattern


def test_an_optional_number_nobody_said_is_left_to_its_default() -> None:
    schema = tool_args_schema(FIND, Said(strings=("Seattle",)))
    assert "max_distance" not in schema["properties"]  # the tool's default, not a made-up one
    free = tool_args_schema(FIND)
    assert free["properties"]["location"] == {"type": "string"} and "$defs" not in free


def test_every_reply_schema_with_tools_carries_the_said_rule_and_is_built_per_turn() -> None:
    said = Said(strings=("Seattle",), numbers=(10.0,))
    for build in (lambda s: act_schema(TOOLS, s), lambda s: plan_schema(TOOLS, 4, s),
                  lambda s: replan_schema(TOOLS, 4, s)):  # fmt: skip
        schema = build(said)
        assert schema["$defs"]["said_string"] == {"enum": ["Seattle"]}
        assert '"location": {"$ref": "#/$defs/said_string"}' in json.dumps(schema)
        assert build(Said(strings=("Paris",)))["$defs"]["said_string"] == {"enum": ["Paris"]}
        assert "$defs" not in build(None) and build(None) is build(None)  # free: cached


def test_the_embedded_models_grammar_accepts_the_said_schema() -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    said = Sources(user=(REQUEST,)).said()
    for schema in (act_schema(TOOLS, said), plan_schema(TOOLS, 4, said)):
        LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


# -- in the planner, every strategy ----------------------------------------------------------

STRATEGIES = ("plan_replan", "next_step", "tool_loop")


def _model(seen: list[ModelRequest]) -> FunctionModel:
    """Calls find_restaurants once (with values the request said), then answers."""
    args = {"location": "Seattle", "cuisine": "Chinese", "max_distance": 10}

    def reply(request: ModelRequest) -> Any:
        seen.append(request)
        first = sum(r.purpose == request.purpose for r in seen) == 1
        if request.purpose == "plan":
            steps = [step("s1", "tool", tool_name="find_restaurants", tool_args=args)]
            return {"goal": "find", "steps": steps if first else []}
        if request.purpose == "act":
            return tool_call("find_restaurants", **args) if first else "Golden Dragon."
        if request.purpose == "replan":
            return {"action": "finish", "reason": "found"}
        return "Golden Dragon."

    return FunctionModel(reply)


def _turn(
    env: Env,
    model: FunctionModel,
    strategy: str,
    values: str,
    *,
    text: str = REQUEST,
    tools: ToolRegistry = TOOLS,
) -> TurnContext:
    return TurnContext(
        key=KEY,
        input=UserMessage(text),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=tools,
        config=PlannerConfig(strategy=strategy, argument_values=values),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_said_limits_the_arguments_every_strategy_asks_for(env: Env, strategy: str) -> None:
    seen: list[ModelRequest] = []
    events = run(_turn(env, _model(seen), strategy, "said"))
    [call] = [e for e in of(events, ToolCallEvent) if e.name == "find_restaurants"]
    assert call.arguments["location"] == "Seattle"
    asked = [_schemas(r) for r in seen if r.purpose in ("plan", "act", "replan")]
    assert asked and all(asked)
    for schemas in asked:
        for schema in schemas:
            said = schema["$defs"]["said_string"]["enum"]
            assert "Seattle" in said and "Chinese cuisine" in said
            assert '"max_distance": {"enum": [10]}' in json.dumps(schema)


def _schemas(request: ModelRequest) -> list[dict[str, Any]]:
    """What a request asks the reply to follow: its JSON schema, or the parameters of the
    tools it offers (a backend with function calling)."""
    if request.json_schema:
        return [request.json_schema]
    return [dict(tool.parameters) for tool in request.tools or ()]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_free_leaves_the_arguments_as_the_tool_declares_them(env: Env, strategy: str) -> None:
    seen: list[ModelRequest] = []
    run(_turn(env, _model(seen), strategy, "free"))
    asked = [schema for r in seen for schema in _schemas(r)]
    assert asked and not any("said_string" in json.dumps(schema) for schema in asked)


def test_the_router_fills_arguments_from_what_was_said(env: Env) -> None:
    seen: list[ModelRequest] = []
    model = _model(seen)
    turn = TurnContext(
        key=KEY,
        input=UserMessage(REQUEST),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=TOOLS,
        config=PlannerConfig(strategy="tool_loop", tool_choice="router", argument_values="said"),
    )
    run(turn)
    [route] = [r for r in seen if r.purpose == "route" and r.json_schema]
    assert route.json_schema["properties"]["location"] == {"$ref": "#/$defs/said_string"}  # type: ignore[index]
    assert "Seattle" in route.json_schema["$defs"]["said_string"]["enum"]  # type: ignore[index]


# -- a number nobody said ---------------------------------------------------------------------


def test_numbers_written_with_a_unit_or_as_a_list_are_numbers() -> None:
    text = "base 6cm, 100µF, flows [200,300,400,500], 12,5 and 1,000,000 people; mp3 v2"
    numbers = set(Sources(user=(text,)).said().numbers)
    assert {6.0, 100.0, 200.0, 300.0, 400.0, 500.0, 12.0, 5.0, 1_000_000.0} <= numbers
    assert not numbers & {0.0, 1.0, 2.0, 3.0}  # a million's groups, a word's digits: not numbers
    assert Sources(user=("five guests",)).has_number(5)  # a number word grounds a number
    assert {5.0, 0.05} <= set(Sources(user=("a rate of 5% a year",)).said().numbers)


def test_a_quoted_value_is_one_value_and_no_run_crosses_its_quotes() -> None:
    said = Sources(user=("lawsuits of the company 'Apple Inc.' from the year 2010",)).said()
    assert "Apple Inc" in said.strings
    assert not [s for s in said.strings if "Inc" in s and "from" in s]
    assert not [s for s in said.strings if "company" in s and "Apple" in s]


def test_a_required_list_under_said_values_holds_at_least_one_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "parties": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["parties"],
    }
    said = Said(strings=("John", "Alice"), words=frozenset({"tags"}))
    props = tool_args_schema(schema, said)["properties"]
    assert props["parties"]["minItems"] == 1
    assert "minItems" not in props["tags"]  # optional: may stay empty
    assert "minItems" not in tool_args_schema(schema)["properties"]["parties"]  # free values


AREA = {
    "type": "object",
    "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
    "required": ["base", "height"],
}


def _area_tools() -> ToolRegistry:
    return ToolRegistry(
        [
            Tool(
                name="triangle_area",
                description="The area of a triangle.",
                args_model=schema_args_model("triangle_area", AREA),
                handler=lambda args: {"area": args["base"] * args["height"] / 2},
                side_effect=False,
                live_state=False,
            )
        ]
    )


def _area_model() -> FunctionModel:
    """Calls triangle_area with numbers of its own (there is no said number to take)."""
    args = {"base": 10, "height": 5}

    def reply(request: ModelRequest) -> Any:
        first = sum(r.purpose == request.purpose for r in model.requests) == 1
        if request.purpose == "plan":
            steps = [step("s1", "tool", tool_name="triangle_area", tool_args=args)]
            return {"goal": "area", "steps": steps if first else []}
        if request.purpose == "act":
            return tool_call("triangle_area", **args) if first else "Done."
        if request.purpose == "replan":
            return {"action": "finish", "reason": "done"}
        return "Done."

    model = FunctionModel(reply)
    return model


def _area_turn(
    env: Env, text: str, model: FunctionModel, strategy: str, values: str
) -> TurnContext:
    return _turn(env, model, strategy, values, text=text, tools=_area_tools())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_under_said_values_a_required_number_nobody_said_is_asked_for(
    env: Env, strategy: str
) -> None:
    model = _area_model()
    events = run(_area_turn(env, "What is the capital of France?", model, strategy, "said"))
    [asked] = of(events, AskUserEvent)
    assert asked.kind == "question" and "base" in asked.question and "height" in asked.question
    assert not of(events, ToolCallEvent)  # a read, and still no invented number runs
    calls = len(model.requests)
    events = run(_area_turn(env, "base 8, height 3", model, strategy, "said"))
    [call] = of(events, ToolCallEvent)
    assert call.arguments == {"base": 8, "height": 3}  # the answer went back to the call
    assert len([r for r in model.requests[calls:] if r.purpose in ("plan", "act")]) <= 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_free_values_and_said_numbers_leave_a_read_as_it_is(env: Env, strategy: str) -> None:
    model = _area_model()
    events = run(_area_turn(env, "What is the capital of France?", model, strategy, "free"))
    assert [e.arguments for e in of(events, ToolCallEvent)] == [{"base": 10, "height": 5}]
    said = run(_area_turn(env, "A triangle, base 10 and height 5", _area_model(), strategy, "said"))
    assert [e.arguments for e in of(said, ToolCallEvent)] == [{"base": 10, "height": 5}]
    assert not [e for e in of(said, AskUserEvent) if e.kind == "question"]


LAWSUITS = {
    "type": "object",
    "properties": {
        "company": {"type": "string"},
        "case_type": {
            "type": "string",
            "description": "The lawsuit's type, e.g., 'IPR', 'Patent'. Default is 'all'.",
        },
        "court": {"type": "string", "description": "The court, e.g. 'federal' or 'state'."},
    },
    "required": ["company"],
}


def _lawsuit_turn(env: Env, text: str, values: str) -> tuple[TurnContext, FunctionModel]:
    tool = Tool(
        name="find_lawsuits",
        description="Lawsuits involving a company.",
        args_model=schema_args_model("find_lawsuits", LAWSUITS),
        handler=lambda args: {"found": 3},
        side_effect=False,
        live_state=False,
    )

    def reply(request: ModelRequest) -> Any:
        first = sum(r.purpose == request.purpose for r in model.requests) == 1
        if request.purpose == "act" and first:
            return tool_call("find_lawsuits", company="Apple")
        return "Three."

    model = FunctionModel(reply)
    return _turn(env, model, "tool_loop", values, text=text, tools=ToolRegistry([tool])), model


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("Patent lawsuits of Apple", "said", {"company": "Apple", "case_type": "Patent"}),
        ("patent lawsuits of Apple", "free", {"company": "Apple"}),  # free: as the model wrote
        ("lawsuits of Apple", "said", {"company": "Apple"}),  # no listed value said
        ("ipr or patent suits of Apple", "said", {"company": "Apple"}),  # two said: no choice
    ],
)
def test_an_optional_value_the_tool_lists_and_the_user_said_is_filled(
    env: Env, text: str, values: str, expected: dict[str, Any]
) -> None:
    turn, _ = _lawsuit_turn(env, text, values)
    [call] = of(run(turn), ToolCallEvent)
    assert call.arguments == expected


# -- tool_loop: a read asked again with nothing new is not run again --------------------------


def _loop(env: Env, actions: list[dict[str, Any]]) -> tuple[list[ToolCallEvent], list[str]]:
    """A tool_loop turn whose model asks for find_restaurants with *actions* in turn, then
    answers; the calls that ran and the purposes asked."""
    seen: list[str] = []
    queue = list(actions)

    def reply(request: ModelRequest) -> Any:
        seen.append(request.purpose)
        if request.purpose == "act" and queue:
            return tool_call("find_restaurants", **queue.pop(0))
        return "Golden Dragon."

    turn = _turn(env, FunctionModel(reply), "tool_loop", "free")
    ran = [e for e in of(run(turn), ToolCallEvent) if e.name == "find_restaurants"]
    return ran, seen


def test_a_read_asked_again_with_its_values_reshuffled_or_fewer_is_not_run_again(
    env: Env,
) -> None:
    first = {"location": "Seattle", "cuisine": "Chinese"}
    ran, seen = _loop(env, [first, {"location": "Chinese", "cuisine": "Seattle"}])
    assert [e.arguments for e in ran] == [first]
    assert seen == ["act", "act", "respond"]  # the reshuffle led to the answer
    ran, _ = _loop(env, [{**first, "tags": ["open late"]}, first])  # fewer values
    assert len(ran) == 1


def test_a_read_asked_again_with_a_new_value_runs(env: Env) -> None:
    first = {"location": "Seattle", "cuisine": "Chinese"}
    other = {"location": "Portland", "cuisine": "Chinese"}
    ran, seen = _loop(env, [first, other, first])
    assert [e.arguments for e in ran] == [first, other]  # two cities, two calls
    assert seen == ["act", "act", "act", "respond"]


def test_the_embedded_model_section_can_turn_said_values_on() -> None:
    config = PlannerConfig.model_validate({"for_embedded_model": {"argument_values": "said"}})
    assert config.argument_values == "free"
    assert config.for_model("llama").argument_values == "said"
    assert config.for_model("openai:gpt-4o-mini").argument_values == "free"
    with pytest.raises(ValueError, match="argument_values"):
        PlannerConfig.model_validate({"argument_values": "copied"})
