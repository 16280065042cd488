# ruff: noqa: E501 - the phrasing table reads best one case a line
"""The gate (``agentkit.planning.gate``): every proposed call passes one policy, once; the
user's own words ground a value whatever it looks like; a field is asked for once, its answer
fills it and the call goes on to the consent — in English and Chinese. (FunctionModel
doubles from the library's test kit.)"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.config import PlannerConfig
from agentkit.events import AskUserEvent, StepCompleteEvent
from agentkit.memory import MemoryRepository
from agentkit.models.function import tool_call
from agentkit.planning import TurnContext, gate
from agentkit.planning.state import UserMessage
from agentkit.store import ConversationKey, InMemoryConfigStore, InMemoryConversationStore
from agentkit.tools import Tool, ToolRegistry
from agentkit.tools.registry import schema_args_model

from .test_planner import of, run, step

KEY = ConversationKey("notes-001", "conv-gate")
STRATEGIES = ("plan_replan", "next_step", "tool_loop")


def _tool(
    name: str, description: str, props: dict[str, Any], required: list[str], store: list[Any]
) -> Tool[Any]:
    schema = {"type": "object", "properties": props, "required": required}

    def handler(args: Any) -> dict[str, Any]:
        store.append((name, args.model_dump()))
        return {"ok": True}

    return Tool(
        name=name,
        description=description,
        args_model=schema_args_model(name, schema),
        handler=handler,
        side_effect=True,
        live_state=False,
    )


@dataclass
class Notes:
    """A notes agent's world: what its tools wrote, and the stores a turn needs."""

    store: InMemoryConversationStore
    kv: InMemoryConfigStore
    tools: ToolRegistry
    written: list[Any]

    def turn(self, text: str, model: FunctionModel, **config: Any) -> TurnContext:
        return TurnContext(
            key=KEY,
            input=UserMessage(text),
            store=self.store,
            memory=MemoryRepository(self.kv),
            model=model,
            tools=self.tools,
            config=PlannerConfig(**config),
        )

    def waiting(self) -> Any:
        loaded = MemoryRepository(self.kv).load_execution_state(KEY.agent_id, KEY.conversation_id)
        return loaded.value.waiting if loaded else None


@pytest.fixture
def notes() -> Notes:
    written: list[Any] = []
    tools = ToolRegistry([
        _tool(
            "add_note",
            "Save a note with a title and a body.",
            {"title": {"type": "string"}, "body": {"type": "string"}},
            ["title"],
            written,
        ),
        _tool(
            "set_timer",
            "Start a timer of some minutes.",
            {"minutes": {"type": "number"}, "label": {"type": "string"}},
            ["minutes"],
            written,
        ),
        _tool(
            "tag_notes",
            "Tag the notes with some tags.",
            {"tags": {"type": "array", "items": {"type": "string"}}},
            ["tags"],
            written,
        ),
    ])  # fmt: skip
    store = InMemoryConversationStore()
    store.create(KEY, "gate")
    return Notes(store, InMemoryConfigStore(), tools, written)


def proposing(tool: str, args: dict[str, Any]) -> FunctionModel:
    """A model that proposes ``tool(args)`` once (in any strategy, or as the router's
    arguments), then finishes."""
    seen: Counter[str] = Counter()

    def reply(request: ModelRequest) -> Any:
        seen[request.purpose] += 1
        first = seen[request.purpose] == 1
        if request.purpose == "route":  # the router fills the chosen tool's arguments
            return args
        if request.purpose in ("plan", "next_step"):
            steps = [step("c1", "tool", tool_name=tool, tool_args=args)] if first else []
            return {"goal": "do it", "steps": steps}
        if request.purpose == "act":
            return tool_call(tool, **args) if first else "Done."
        if request.purpose == "replan":
            return {"action": "finish", "reason": "done"}
        return "Done."

    return FunctionModel(reply)


@dataclass(frozen=True)
class Case:
    request: str
    tool: str
    proposed: dict[str, Any]
    field: str
    expected: Any
    #: the answer to the one question (None: the value was said, no question)
    answer: str | None = None


SAID = [
    # values said outright: straight to consent, whatever they look like
    Case("Save a note called 1234 with body door code", "add_note", {"title": "1234", "body": "door code"}, "title", "1234"),
    Case("Add a note titled todo", "add_note", {"title": "todo"}, "title", "todo"),
    Case("Create a note with the title xxx", "add_note", {"title": "xxx"}, "title", "xxx"),
    Case("Add a note titled TBD", "add_note", {"title": "TBD"}, "title", "TBD"),
    Case("Add a note titled N/A", "add_note", {"title": "N/A"}, "title", "N/A"),
    Case("Add a note called none", "add_note", {"title": "none"}, "title", "none"),
    Case("Add a note called example", "add_note", {"title": "example"}, "title", "example"),
    Case("Add a note titled 'TBD: launch plan'", "add_note", {"title": "TBD: launch plan"}, "title", "TBD: launch plan"),
    Case("Add a note called string theory", "add_note", {"title": "string theory"}, "title", "string theory"),
    Case("Set a timer for sixty minutes", "set_timer", {"minutes": 60}, "minutes", 60),
    Case("Set a timer for 90 minutes", "set_timer", {"minutes": 90}, "minutes", 90),
    Case("Set a timer for two hundred minutes", "set_timer", {"minutes": 200}, "minutes", 200),
    Case("Set a timer for twenty five minutes", "set_timer", {"minutes": 25}, "minutes", 25),
    Case("Set a timer for 45min", "set_timer", {"minutes": 45}, "minutes", 45),
    Case("Set a timer for 1.5 minutes", "set_timer", {"minutes": 1.5}, "minutes", 1.5),
    Case("Tag my notes red, blue", "tag_notes", {"tags": ["red", "blue"]}, "tags", ["red", "blue"]),
    Case("记一条笔记，标题是todo", "add_note", {"title": "todo"}, "title", "todo"),
    Case("记一条笔记，标题是 2046", "add_note", {"title": "2046"}, "title", "2046"),
    Case("记一条笔记：买牛奶", "add_note", {"title": "买牛奶"}, "title", "买牛奶"),
    Case("记一条笔记，标题是 xxx", "add_note", {"title": "xxx"}, "title", "xxx"),
    Case("记一条笔记，标题叫 待定", "add_note", {"title": "待定"}, "title", "待定"),
    Case("记一条笔记，标题是「周报」", "add_note", {"title": "周报"}, "title", "周报"),
    Case("设一个六十分钟的计时器", "set_timer", {"minutes": 60}, "minutes", 60),
    Case("设一个两百分钟的计时器", "set_timer", {"minutes": 200}, "minutes", 200),
    Case("设一个十二分钟的计时器", "set_timer", {"minutes": 12}, "minutes", 12),
    Case("设一个三千五百分钟的计时器", "set_timer", {"minutes": 3500}, "minutes", 3500),
]  # fmt: skip
INVENTED = [
    # values the model invented: asked once, the plain answer is the value
    Case("Add a note", "add_note", {"title": "<title>"}, "title", "todo", "todo"),
    Case("Add a note", "add_note", {"title": "{{"}, "title", "groceries", "groceries"),
    Case("Add a note", "add_note", {"title": "]["}, "title", "weekly review", "it's called weekly review"),
    Case("Add a note", "add_note", {"title": "string"}, "title", "xxx", "call it xxx"),
    Case("Add a note", "add_note", {"title": "My Shopping List"}, "title", "1234", "1234"),
    Case("Add a note", "add_note", {"title": "your_title"}, "title", "N/A", "N/A"),
    Case("Add a note", "add_note", {"title": "title"}, "title", "none", "none"),
    Case("Add a note", "add_note", {"title": "<title>"}, "title", "TBD: launch plan", '"TBD: launch plan"'),
    Case("Start a timer", "set_timer", {"minutes": 10}, "minutes", 60, "sixty"),
    Case("Start a timer", "set_timer", {"minutes": 5}, "minutes", 45, "45"),
    Case("Start a timer", "set_timer", {"minutes": 5}, "minutes", 205, "two hundred and five"),
    Case("Tag my notes", "tag_notes", {"tags": ["<tag>"]}, "tags", ["red", "blue"], "red and blue"),
    Case("记一条笔记", "add_note", {"title": "<标题>"}, "title", "买牛奶", "买牛奶"),
    Case("记一条笔记", "add_note", {"title": "]["}, "title", "周报", "叫周报"),
    Case("记一条笔记", "add_note", {"title": "todo"}, "title", "2046", "标题是 2046"),
    Case("设一个计时器", "set_timer", {"minutes": 10}, "minutes", 60, "六十"),
    Case("设一个计时器", "set_timer", {"minutes": 3}, "minutes", 200, "两百"),
    Case("设一个计时器", "set_timer", {"minutes": 3}, "minutes", 10000, "一万"),
]  # fmt: skip
CASES = SAID + INVENTED


def test_the_table_has_forty_cases_in_both_languages() -> None:
    assert len(CASES) >= 40
    han = [c for c in CASES if any("\u4e00" <= ch <= "\u9fff" for ch in c.request)]
    assert len(han) >= 12 and len(CASES) - len(han) >= 12


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.request}|{c.answer}")
def test_a_said_value_goes_to_consent_and_an_invented_one_is_asked_once(
    notes: Notes, case: Case
) -> None:
    model = proposing(case.tool, case.proposed)
    events = run(notes.turn(case.request, model))
    [asked] = of(events, AskUserEvent)
    if case.answer is None:
        assert asked.kind == "confirmation", asked.question  # said: never asked for
    else:
        assert asked.kind == "question" and asked.rule == "grounding"
        assert notes.waiting().pending_fields == (case.field,)
        events = run(notes.turn(case.answer, model))
        [asked] = of(events, AskUserEvent)
        assert asked.kind == "confirmation", asked.question  # never the same field twice
    assert asked.rule == "consent" and asked.tool_args[case.field] == case.expected
    run(notes.turn("yes" if case.request.isascii() else "好的", model))
    assert notes.written == [(case.tool, {**case.proposed, case.field: case.expected})]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_answer_fills_the_field_in_every_strategy(notes: Notes, strategy: str) -> None:
    model = proposing("add_note", {"title": "<title>"})
    [asked] = of(run(notes.turn("Add a note", model, strategy=strategy)), AskUserEvent)
    assert asked.kind == "question"
    [consent] = of(run(notes.turn("todo", model, strategy=strategy)), AskUserEvent)
    assert consent.kind == "confirmation" and consent.tool_args == {"title": "todo"}


def test_a_plan_step_s_question_names_its_rule_and_the_reason(notes: Notes) -> None:
    events = run(notes.turn("Add a note", proposing("add_note", {"title": "]["})))
    [asked] = of(events, AskUserEvent)
    assert asked.rule == "grounding" and "title" in asked.reason
    assert "add_note" in asked.question and "title" in asked.question


def test_chinese_questions_are_asked_in_chinese(notes: Notes) -> None:
    events = run(notes.turn("记一条笔记", proposing("add_note", {"title": "]["})))
    [asked] = of(events, AskUserEvent)
    assert "请告诉我" in asked.question and "title" in asked.question


def test_an_agent_overrides_the_question_template(notes: Notes, tmp_path: Any) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "ask_arguments.en.md").write_text("Which $fields for $tool?")
    turn = notes.turn("Add a note", proposing("add_note", {"title": "]["}))
    turn = dataclasses.replace(turn, agent_dir=tmp_path)
    [asked] = of(run(turn), AskUserEvent)
    assert asked.question == "Which title for add_note?"


# -- the gate runs once per proposed call, in every strategy, chosen by the model or routed ----


def _counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    seen: Counter[str] = Counter()
    review: Callable[..., Any] = gate.Policy.review

    def counted(self: gate.Policy, turn: Any, step: Any) -> Any:
        seen[step.id] += 1
        return review(self, turn, step)

    monkeypatch.setattr(gate.Policy, "review", counted)
    return seen


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("tool_choice", ["model", "router"])
def test_every_proposed_call_passes_the_gate_once(
    notes: Notes, monkeypatch: pytest.MonkeyPatch, strategy: str, tool_choice: str
) -> None:
    seen = _counting(monkeypatch)
    routed = proposing("add_note", {"title": "groceries"})
    config = {"strategy": strategy, "tool_choice": tool_choice}
    events = run(notes.turn("add a note called groceries", routed, **config))
    [consent] = of(events, AskUserEvent)
    assert consent.kind == "confirmation" and consent.tool_name == "add_note"
    assert list(seen.values()) == [1], seen  # one proposed call, one review
    run(notes.turn("yes", routed, **config))
    assert notes.written == [("add_note", {"title": "groceries"})]
    assert all(count <= 2 for count in seen.values())  # again only when run after consent


def test_a_refused_call_names_its_rule_in_the_step_event(notes: Notes) -> None:
    model = proposing("add_note", {"title": "groceries"})
    events = run(notes.turn("which notes do I have?", model, strategy="tool_loop"))
    [held] = [e for e in of(events, StepCompleteEvent) if e.status == "skipped"]
    assert held.rule == "reads" and "nothing to change" in held.reason
    assert not of(events, AskUserEvent) and notes.written == []


def test_the_gate_is_a_config_key_and_a_rule_can_be_left_out(notes: Notes) -> None:
    model = proposing("add_note", {"title": "]["})
    config = {"gate": ("reads", "consent")}  # no grounding: the invented value is asked about
    [asked] = of(run(notes.turn("Add a note", model, **config)), AskUserEvent)
    assert asked.kind == "confirmation" and asked.rule == "consent"


def test_a_string_with_a_quote_is_never_offered_to_the_decoder() -> None:
    # llama.cpp's grammar from a JSON schema mis-escapes such a string and its process died
    from agentkit.planning.grounding import Sources

    result = 'list_notes: {"notes": [{"title": "the \\"big\\" one"}, {"title": "gym"}]}'
    said = Sources(user=("find my notes",), tools=(result,)).said()
    assert "gym" in said.strings  # the observation is read after its tool's name
    assert not [s for s in said.strings if '"' in s or "\\" in s]


def test_the_run_browser_and_report_show_the_rule_beside_the_step(notes: Notes) -> None:
    from agentkit.eval.timeline import timeline
    from agentkit.eval.transcript import Transcript, UserTurn

    asked = run(notes.turn("Add a note", proposing("add_note", {"title": "]["})))
    held = run(
        notes.turn(
            "which notes do I have?", proposing("add_note", {"title": "x"}), strategy="tool_loop"
        )
    )
    turns = [UserTurn(number=1, said="Add a note", events=asked), UserTurn(number=2, events=held)]
    view = timeline(Transcript(run="r", scenario="s", turns=turns))
    details = [entry.detail for turn in view.turns for entry in turn.entries]
    assert any(
        d.startswith("held by grounding: not given in the conversation: title") for d in details
    )
    assert any(
        d.startswith("held by reads: the request asks for nothing to change") for d in details
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("set the front door code to 1234", {"door": "front", "code": "1234"}),
        ("door: back, code = 0000", {"door": "back", "code": "0000"}),
        ("the code is 4321 for the garage door", {"code": "4321", "door": "garage"}),
        ("set a door code", {}),
    ],
)
def test_the_request_s_labelled_words_fill_their_arguments(text: str, expected: Any) -> None:
    from agentkit.planning.answers import labelled_values

    door = _tool(
        "set_door_code",
        "Set a door's code.",
        {"door": {"type": "string"}, "code": {"type": "string"}},
        ["door", "code"],
        [],
    )
    assert labelled_values(door, text) == expected


def test_labelled_words_win_over_the_model_only_when_the_config_says(notes: Notes) -> None:
    model = proposing("set_timer", {"minutes": 5, "label": "minutes"})
    text = "start a 5 minute timer, label tea"
    [asked] = of(run(notes.turn(text, model, labelled_arguments=True)), AskUserEvent)
    assert asked.tool_args == {"minutes": 5, "label": "tea"}
    [asked] = of(
        run(notes.turn(text, proposing("set_timer", {"minutes": 5, "label": "minutes"}))),
        AskUserEvent,
    )
    assert asked.tool_args == {"minutes": 5, "label": "minutes"}


def test_a_credential_is_never_a_plain_word_of_the_request() -> None:
    from agentkit.planning.grounding import Sources, check

    connect = _tool(
        "connect",
        "Connect an account.",
        {"account": {"type": "string"}, "api_key": {"type": "string"}},
        ["account", "api_key"],
        [],
    )
    said = Sources(user=("Connect my Binance account",))
    assert check(connect, {"account": "Binance", "api_key": "Binance"}, said).missing == (
        "api_key",
    )
    typed = Sources(user=("Connect Binance with key AKEY-0123456789",))
    assert check(connect, {"account": "Binance", "api_key": "AKEY-0123456789"}, typed).missing == ()
