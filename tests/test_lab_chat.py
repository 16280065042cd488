"""The chat panel: its view functions without widgets, and the widget driven by Button.click()."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentkit import (
    Agent,
    ConversationNotFoundError,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
)
from agentkit.events import (
    AgentOutputEvent,
    AskUserEvent,
    CompressionEvent,
    ResultEvent,
    SessionEvent,
    ToolCallEvent,
)
from agentkit.tools import SecretMask
from lab import ChatPanel
from lab.chat_state import (
    NEW_CONVERSATION,
    TurnView,
    compression_note,
    conversation_options,
    describe_event,
    message_problem,
    transcript_html,
)

from tests.fakes.gated_model import Gate
from tests.test_lab_plan_state import shown

SESSION = SessionEvent(
    agent_id="innovator-001",
    conversation_id="conv-a",
    message_id="msg-1",
    scenario="B",
    injected="nothing (live session)",
)


API_KEY = "AKEY-0123456789abcd"
#: the desk's key format, as its toolset declares it
mask = SecretMask(patterns=SecretMask.compile([r"AKEY-[0-9A-Za-z]{8,}"])).text


def result(text: str = "", status: str = "completed") -> ResultEvent:
    return ResultEvent(conversation_id="conv-a", message_id="msg-1", status=status, text=text)  # type: ignore[arg-type]


# -- the view functions -----------------------------------------------------------------------


def test_turn_view_joins_the_streamed_pieces_and_keeps_one_log_line_for_them() -> None:
    view = TurnView(user_text="hi")
    for event in (SESSION, *(AgentOutputEvent(text=t) for t in ("Hel", "lo ", "you"))):
        view.apply(event)
    view.apply(result("Hello you"))
    assert view.reply == "Hello you"
    assert (view.scenario, view.conversation_id, view.status) == ("B", "conv-a", "completed")
    assert view.log[0].startswith("session: scenario B")
    assert view.log[1] == "agent_output: 3 pieces, 9 characters"
    assert view.log[2].startswith("result: completed")
    assert len(view.log) == 3


def test_a_turn_without_streamed_text_shows_the_result_text() -> None:
    view = TurnView(user_text="create a trader")
    view.apply(SESSION)
    view.apply(AskUserEvent(question="What should it be called?"))
    view.apply(result("What should it be called?"))
    assert view.reply == "What should it be called?"


def test_the_messages_a_turn_added_come_from_its_events_masked_as_stored() -> None:
    view = TurnView(user_text=f"  connect with key {API_KEY} ")
    assert view.messages(mask) == []  # not started: nothing was written
    view.apply(SESSION)
    (asked,) = view.messages(mask)  # started: the user's message is stored, masked
    assert (asked.role, asked.message_id) == ("user", "msg-1")
    assert asked.content == "connect with key ****abcd"
    view.apply(result(f"Connected with {API_KEY}."))
    user, answer = view.messages(mask)
    assert user.content == asked.content
    assert (answer.role, answer.content, answer.message_id) == (
        "assistant",
        "Connected with ****abcd.",
        "msg-1",
    )
    silent = TurnView(user_text="/clear")
    silent.apply(SESSION)
    silent.apply(result(""))
    assert [m.role for m in silent.messages(mask)] == ["user"]  # no answer, none stored


def test_a_compression_after_the_result_is_kept_and_described() -> None:
    view = TurnView(user_text="hi")
    view.apply(SESSION)
    view.apply(result("Hello"))
    assert view.done and view.compression is None
    compressed = CompressionEvent(
        messages_before=12, messages_after=4, tokens_before=900, tokens_after=300, facts_added=2
    )
    view.apply(compressed)
    assert view.compression == compressed
    assert view.log[-1] == "compression: 12→4 messages, 900→300 tokens"
    note = compression_note(compressed)
    assert "12 → 4 messages" in note and "900 → 300 tokens" in note and "2 facts" in note


def test_the_event_log_masks_tool_arguments() -> None:
    line = describe_event(
        ToolCallEvent(
            id="s1",
            name="create_exchange_config",
            arguments={"exchange": "binance", "api_key": "AKEY-0123456789abcd"},
        )
    )
    assert "AKEY-0123456789abcd" not in line
    assert "****abcd" in line and "binance" in line


def test_the_transcript_escapes_what_it_shows() -> None:
    view = TurnView(user_text="<script>alert(1)</script>")
    html = transcript_html([], view)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "Type a message first."), ("   \n", "Type a message first."), ("x" * 32_001, "at most")],
)
def test_messages_that_cannot_be_sent_are_named(text: str, problem: str) -> None:
    assert problem in message_problem(text)
    assert message_problem(" hello ") == ""


def test_the_picker_offers_a_new_conversation_first(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        first = agent.create_conversation("First")
        second = agent.create_conversation("Second")
        options = conversation_options(agent.list_conversations())
    assert options[0][1] == NEW_CONVERSATION
    assert {value for _, value in options[1:]} == {first.conversation_id, second.conversation_id}


# -- the widget -----------------------------------------------------------------------------


@pytest.fixture
def chat_agent(data_dir: Path) -> Iterator[Agent]:
    script = {"chat": ["Hello from the scripted model.", "Still here, same session."]}
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        yield agent


def test_send_streams_the_reply_and_the_second_message_reuses_the_live_session(
    chat_agent: Agent,
) -> None:
    panel = ChatPanel(chat_agent)
    assert panel.picker.value == NEW_CONVERSATION
    panel.input.value = "Hi there"
    panel.send_button.click()
    assert panel.turn is not None
    events = panel.turn.result(timeout=60)
    assert events[0].type == "session" and events[-1].type == "result"
    assert sum(e.type == "agent_output" for e in events) > 1  # it streamed in pieces
    conversation = panel.conversation_id
    assert conversation is not None and panel.picker.value == conversation
    assert "scenario A" in panel.badge.value
    assert "Hello from the scripted model." in panel.transcript.value
    assert panel.input.value == ""
    assert not panel.send_button.disabled and panel.stop_button.disabled

    panel.input.value = "Still there?"
    panel.send_button.click()
    panel.turn.result(timeout=60)
    assert "scenario B" in panel.badge.value
    assert "Still here, same session." in panel.transcript.value
    stored = [m.content for m in chat_agent.load_conversation_history(conversation)]
    assert stored == [
        "Hi there",
        "Hello from the scripted model.",
        "Still there?",
        "Still here, same session.",
    ]
    assert "session: scenario A" in panel.event_log.value
    assert "session: scenario B" in panel.event_log.value


def test_an_empty_message_is_refused_and_nothing_is_written(chat_agent: Agent) -> None:
    panel = ChatPanel(chat_agent)
    panel.input.value = "   "
    panel.send_button.click()
    assert panel.turn is None
    assert "Type a message first." in panel.notice.value
    assert chat_agent.list_conversations() == []


def test_a_message_refused_before_its_turn_goes_back_into_the_text_box(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model="nosuchbackend:x") as agent:
        panel = ChatPanel(agent)
        panel.input.value = "Keep me"
        panel.send_button.click()
        assert panel.turn is not None
        with pytest.raises(Exception, match="nosuchbackend"):
            panel.turn.result(timeout=60)
        assert panel.input.value == "Keep me"
        assert "Not sent" in panel.notice.value
        assert agent.list_conversations() == []
        assert not panel.busy and not panel.send_button.disabled


def test_an_unknown_conversation_is_a_clear_error(chat_agent: Agent) -> None:
    with pytest.raises(ConversationNotFoundError):
        ChatPanel(chat_agent, "conv-doesnotexist")


def test_picking_a_conversation_shows_its_messages(chat_agent: Agent) -> None:
    first = chat_agent.send("Hi there")
    panel = ChatPanel(chat_agent)
    panel.select(first.conversation_id)
    assert panel.conversation_id == first.conversation_id
    assert "Hello from the scripted model." in panel.transcript.value
    panel.select(None)
    assert panel.conversation_id is None
    assert "No messages yet" in panel.transcript.value


def held() -> Gate:
    """Replies stream "Hello ", then wait until the test opens the gate (or the turn is
    cancelled), then "world"."""
    return Gate("Hello ", ("world",))


def test_a_second_message_while_a_turn_runs_is_refused_and_kept(data_dir: Path) -> None:
    gate = held()
    with Agent.open("innovator-001", data_dir=data_dir, model=gate.model) as agent:
        panel = ChatPanel(agent)
        first = panel.submit("first")
        assert first is not None
        assert gate.parked.wait(timeout=60)
        assert panel.busy and panel.send_button.disabled and not panel.stop_button.disabled
        panel.input.value = "second"
        assert panel.submit() is None
        assert panel.input.value == "second"
        assert "still running" in panel.notice.value
        gate.open_gate()
        first.result(timeout=60)
        assert "Hello world" in panel.transcript.value


def test_stop_cancels_the_running_turn(data_dir: Path) -> None:
    gate = held()
    with Agent.open("innovator-001", data_dir=data_dir, model=gate.model) as agent:
        panel = ChatPanel(agent)
        turn = panel.submit("tell me a long story")
        assert turn is not None
        assert gate.parked.wait(timeout=60)
        assert "Hello" in panel.transcript.value  # the first piece is on screen mid-turn
        panel.stop_button.click()
        assert panel.stopping is not None and panel.stopping.result(timeout=60) is True
        assert "Stop requested." in panel.notice.value
        gate.open_gate()  # the next piece arrives; the session sees the cancel and ends
        stopped = turn.result(timeout=60)
    final = stopped[-1]
    assert isinstance(final, ResultEvent) and final.status == "cancelled"
    assert "Stopped" in panel.notice.value
    assert "world" not in panel.transcript.value


def test_a_planner_panel_embeds_the_plan_and_updates_it_after_the_turn(data_dir: Path) -> None:
    script = {
        "plan": [
            {
                "goal": "list the traders",
                "steps": [
                    {
                        "id": "s1",
                        "type": "tool",
                        "title": "List traders",
                        "tool_name": "list_traders",
                    },
                    {"id": "s2", "type": "respond", "title": "Answer", "instruction": "Summarise."},
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": ["You have no traders yet."],
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        panel = ChatPanel(agent)
        assert panel.plan_view is not None
        assert "No plan steps yet" in panel.plan_view.table.value
        turn = panel.submit("list my traders")
        assert turn is not None
        turn.result(timeout=60)
        table = panel.plan_view.table.value
        assert "List traders" in table and "list_traders" in table
        assert table.count(">done<") == 2
        assert panel.plan_view.conversation_id == panel.conversation_id
        assert "You have no traders yet." in panel.transcript.value
        assert "scenario A" in panel.badge.value


def test_stop_cancels_a_planner_turn_and_the_plan_shows_where_it_stopped(
    data_dir: Path,
) -> None:
    plan = {
        "goal": "answer",
        "steps": [{"id": "s1", "type": "respond", "title": "Answer", "instruction": "Answer."}],
    }
    gate = held()

    def reply(request: ModelRequest) -> object:  # the plan at once, the answer held
        return plan if request.purpose == "plan" else gate.stream(request)

    with Agent.open("desk-001", data_dir=data_dir, model=FunctionModel(reply)) as agent:
        panel = ChatPanel(agent)
        turn = panel.submit("hello")
        assert turn is not None
        assert gate.parked.wait(timeout=60)
        assert panel.plan_view is not None and ">running<" in panel.plan_view.table.value
        panel.stop_button.click()
        assert panel.stopping is not None and panel.stopping.result(timeout=60) is True
        gate.open_gate()
        events = turn.result(timeout=60)
        final = events[-1]
        assert isinstance(final, ResultEvent) and final.status == "cancelled"
        assert "Stopped" in panel.notice.value
        assert ">running<" not in panel.plan_view.table.value  # the step was skipped
        assert panel.conversation_id is not None
        stored = agent.execution_state(panel.conversation_id)
        assert stored is not None  # and the view, from the events only, shows what is stored
        assert shown(panel.plan_view.state) == shown(stored.value)


class UncancellableAgent(Agent):
    """An agent whose backend cannot interrupt a turn (``cancel`` finds nothing to stop)."""

    async def cancel(self, conversation_id: str) -> bool:
        return False


def test_stop_says_so_when_the_agent_cannot_cancel_the_turn(data_dir: Path) -> None:
    gate = held()
    with UncancellableAgent.open("innovator-001", data_dir=data_dir, model=gate.model) as agent:
        panel = ChatPanel(agent)
        turn = panel.submit("hello")
        assert turn is not None
        assert gate.parked.wait(timeout=60)
        panel.stop_button.click()
        assert panel.stopping is not None and panel.stopping.result(timeout=60) is False
        assert "Nothing to stop" in panel.notice.value
        gate.open_gate()
        events = turn.result(timeout=60)
    assert events[-1].type == "result" and events[-1].status == "completed"
    assert "Hello world" in panel.transcript.value


def test_a_chat_agent_has_no_plan_view_unless_asked(chat_agent: Agent) -> None:
    assert ChatPanel(chat_agent).plan_view is None
    assert ChatPanel(chat_agent, plan=True).plan_view is not None


def test_a_turn_started_in_another_view_shows_here_as_busy_and_can_be_stopped(
    data_dir: Path,
) -> None:
    gate = held()
    with Agent.open("innovator-001", data_dir=data_dir, model=gate.model) as agent:
        conversation = agent.create_conversation("shared").conversation_id
        there, here = ChatPanel(agent, conversation), ChatPanel(agent, conversation)
        assert not here.busy
        turn = there.submit("hello")
        assert turn is not None
        assert gate.parked.wait(timeout=60)
        assert here.busy  # the agent says a turn of the conversation runs
        here.input.value = "me too"
        assert here.submit() is None  # refused, and kept
        assert "still running" in here.notice.value and here.input.value == "me too"
        here.reload()
        assert here.send_button.disabled and not here.stop_button.disabled
        here.stop_button.click()
        assert here.stopping is not None and here.stopping.result(timeout=60) is True
        gate.open_gate()
        assert turn.result(timeout=60)[-1].status == "cancelled"
        here.reload()
        assert not here.busy and not here.send_button.disabled
        assert "Hello" in here.transcript.value  # the reply kept so far, as stored


def test_a_compression_after_the_reply_is_shown_and_ends_the_turn(data_dir: Path) -> None:
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["compression"] = {"max_messages": 4, "token_threshold": 10, "keep_recent": 2}
    config_path.write_text(json.dumps(config))
    script = {
        "plan": [{"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}],
        "respond": ["Noted."],
        "summarize": [{"current_goal": "set up trading", "important_facts": []}],
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        conversation = agent.create_conversation("long").conversation_id
        for index in range(3):
            question = Message.user(f"old question {index}")
            agent.append_message(conversation, question)
            answer = Message.assistant(f"old answer {index}", message_id=question.message_id)
            agent.append_message(conversation, answer)
        panel = ChatPanel(agent, conversation)
        turn = panel.submit("remember that I trade on Binance")
        assert turn is not None
        events = turn.result(timeout=60)
        assert [e.type for e in events][-2:] == ["result", "compression"]  # after the result
        assert panel.turn_view is not None and panel.turn_view.compression == events[-1]
        assert "History compressed after the reply: 8 → 2 messages" in panel.notice.value
        assert "compression: 8→2 messages" in panel.event_log.value
        assert not panel.busy and not panel.send_button.disabled  # the turn ended with it
        stored = [m.content for m in agent.load_conversation_history(conversation)]
        assert [m.content for m in panel.history] == stored
        assert stored[-2:] == ["remember that I trade on Binance", "Noted."]


def test_the_panel_says_what_the_turn_is_doing_before_the_reply() -> None:
    from agentkit.events import StepStartEvent, ToolCallEvent, ToolResultEvent

    view = TurnView(user_text="yes")
    assert "…" in transcript_html([], view) and "running" not in transcript_html([], view)
    view.apply(ToolCallEvent(id="c1", name="create_trader", arguments={}))
    assert "running create_trader…" in transcript_html([], view)
    view.apply(ToolResultEvent(id="c1", name="create_trader", output="{}", ok=True))
    assert "writing the answer…" in transcript_html([], view)
    view.apply(StepStartEvent(step_id="s", step_type="respond", title="Answer"))
    view.apply(AgentOutputEvent(text="Done."))
    html = transcript_html([], view)
    assert "Done." in html and "writing the answer" not in html
