"""TaskState, ExecutionState, the chat window, token estimates and the memory repository."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from agentkit.errors import InvalidIdError, UsageError
from agentkit.memory import (
    ChatHistory,
    CorruptStateError,
    DecisionMemory,
    ExecutionState,
    MemoryRepository,
    Observation,
    PlanStep,
    TaskState,
    Waiting,
    estimate_tokens,
    estimator_for,
    is_allowed_open_loop,
    looks_secret,
)
from agentkit.models.scripted import ScriptedModel
from agentkit.store.kv import InMemoryConfigStore, VersionConflictError
from agentkit.types import Message, ToolCallRecord

# -- TaskState ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "kept"),
    [
        ("finish trader setup once external config is ready", True),
        ("user still wants to finish onboarding", True),
        ("wait for API secret", False),
        ("Waiting for the exchange to be configured", False),
        ("call get_exchange_configs", False),
        ("step 2: create the trader", False),
        ("Step 3 - confirm", False),
        ("ask for exchange id", False),
        ("retry the current step", False),
        ("the tool call failed", False),
        ("store the api_key for binance", False),
        ("check key sk-abc123def456ghi789jkl012", False),
        ("verify 3f9a0c1b2d4e5f60718293a4b5c6d7e8f9a0b1c2", False),
        ("Use tool manage_trader", False),
    ],
)
def test_open_loop_sanitiser(item: str, kept: bool) -> None:
    assert is_allowed_open_loop(item) is kept
    state = TaskState(open_loops=(item,)).normalize()
    assert state.open_loops == ((item,) if kept else ())


def test_looks_secret_spares_ordinary_text() -> None:
    assert not looks_secret("the user prefers BTC-USDT perpetuals on the 4h chart")
    assert looks_secret("passphrase is hunter2")
    assert looks_secret("AKIAABCDEFGHIJKLMNOP")


def test_normalize_trims_dedupes_and_fills_timestamps() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    state = TaskState(
        current_goal="  set up a trader ",
        important_facts=(" Uses Binance ", "uses binance", "", "  ", "likes low risk"),
        pinned_facts=("Name is Ada", "name is ada"),
        last_decision=DecisionMemory(action="  pause  ", reason=""),
    ).normalize(now=now)
    assert state.current_goal == "set up a trader"
    assert state.important_facts == ("Uses Binance", "likes low risk")
    assert state.pinned_facts == ("Name is Ada",)
    assert state.last_decision == DecisionMemory(action="pause", timestamp=now)
    assert state.updated_at == now
    assert state.normalize() == state


def test_normalize_drops_empty_decision_and_facts_repeating_pins() -> None:
    state = TaskState(
        important_facts=("NAME IS ADA", "other"),
        pinned_facts=("name is ada",),
        last_decision=DecisionMemory(action=" ", reason=""),
    ).normalize()
    assert state.important_facts == ("other",)
    assert state.last_decision is None


def test_render_follows_the_nofx_outline() -> None:
    assert TaskState().render() == ""
    state = TaskState(
        current_goal="create a trader",
        active_flow="onboarding",
        open_loops=("finish trader setup once external config is ready", "call get_traders"),
        important_facts=("user trades on OKX",),
        pinned_facts=("always answer in English",),
        last_decision=DecisionMemory(action="use OKX", reason="user asked", still_valid=True),
    )
    assert state.render().splitlines() == [
        "[Structured Task State - durable, non-derivable context]",
        "- Current goal: create a trader",
        "- Active flow: onboarding",
        "- High-level open loop: finish trader setup once external config is ready",
        "- Pinned fact (set by the user): always answer in English",
        "- Important fact: user trades on OKX",
        "- Last decision: use OKX | reason: user asked | still valid",
    ]


def test_pin_and_unpin() -> None:
    state = TaskState().pin("my name is Ada").pin("My name is Ada")
    assert state.pinned_facts == ("my name is Ada",)
    assert state.unpin("MY NAME IS ADA").pinned_facts == ()


def test_task_state_rejects_unknown_fields_and_versions() -> None:
    with pytest.raises(ValueError, match="extra"):
        TaskState.model_validate({"current_goal": "x", "goal": "y"})
    with pytest.raises(ValueError, match="v"):
        TaskState.model_validate({"v": 2})


# -- ExecutionState -------------------------------------------------------------------------


def _full_execution_state() -> ExecutionState:
    at = datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)
    return ExecutionState(
        session_id="sess_1",
        conversation_id="conv-1",
        goal="create a trader",
        status="waiting_confirmation",
        plan_id="plan_1",
        steps=(
            PlanStep(
                id="step_1",
                type="tool",
                title="List exchanges",
                tool_name="get_exchange_configs",
                tool_args={"limit": 5, "filter": {"enabled": True}, "tags": ["a", None]},
                status="done",
                result_summary="2 exchanges",
            ),
            PlanStep(
                id="step_2",
                type="ask_user",
                title="Confirm",
                instruction="Create the trader on OKX?",
                requires_confirmation=True,
                status="running",
            ),
            PlanStep(id="step_3", type="respond", title="Report", status="pending"),
        ),
        current_step_id="step_2",
        observations=(
            Observation(step_id="step_1", kind="tool_result", content='{"n": 2}', at=at),
            Observation(kind="live_state", content="3 traders", at=at),
        ),
        waiting=Waiting(
            question="Create the trader on OKX?",
            intent="confirm_action",
            pending_fields=("exchange_id",),
            confirmation_target="manage_trader",
            created_at=at,
        ),
        final_answer="",
        last_error="earlier failure",
        capability_signature="sha256:abc",
        updated_at=at,
    )


def test_execution_state_round_trips_through_json_with_all_fields() -> None:
    state = _full_execution_state()
    text = state.model_dump_json()
    data = json.loads(text)
    assert set(data) == set(ExecutionState.model_fields)
    assert data["updated_at"] == "2026-03-01T12:00:00.123Z"
    assert ExecutionState.model_validate_json(text) == state
    assert ExecutionState.model_validate(data) == state


def test_waiting_is_derived_from_status() -> None:
    state = _full_execution_state()
    assert state.is_waiting
    assert state.is_active
    resumed = state.resume()
    assert not resumed.is_waiting
    assert resumed.waiting is None
    assert resumed.status == "running"
    paused = resumed.pause(Waiting(question="Which exchange?"))
    assert paused.status == "waiting_user"
    assert paused.is_waiting
    with pytest.raises(ValueError, match="needs 'waiting'"):
        ExecutionState(status="waiting_user")
    with pytest.raises(ValueError, match="must not carry"):
        ExecutionState(status="running", waiting=Waiting(question="?"))


def test_step_helpers() -> None:
    state = _full_execution_state().resume()
    assert state.next_pending_step() is not None
    assert state.next_pending_step().id == "step_3"  # type: ignore[union-attr]
    done = state.mark_step_done("step_2", "confirmed")
    assert done.step("step_2").status == "done"
    assert done.step("step_2").result_summary == "confirmed"
    assert done.updated_at >= state.updated_at
    running = done.mark_step_running("step_3")
    assert running.current_step_id == "step_3"
    failed = running.mark_step_failed("step_3", "boom")
    assert failed.step("step_3").status == "failed"
    assert failed.step("step_3").error == "boom"
    assert failed.last_error == "boom"
    assert failed.next_pending_step() is None
    assert failed.fail("boom").status == "failed"
    assert not failed.fail("boom").is_active
    assert done.complete("all set").final_answer == "all set"
    with pytest.raises(UsageError, match="no step 'nope'"):
        state.mark_step_done("nope")


def test_execution_state_checks_step_ids() -> None:
    with pytest.raises(ValueError, match="unique"):
        ExecutionState(steps=(PlanStep(id="a", type="reason"), PlanStep(id="a", type="respond")))
    with pytest.raises(ValueError, match="names no step"):
        ExecutionState(current_step_id="ghost")


def test_a_transition_is_checked_like_a_load() -> None:
    """The helpers copy instead of validating again, and still refuse a broken state."""
    state = _full_execution_state().resume()
    twice = PlanStep(id="a", type="reason")
    with pytest.raises(ValueError, match="unique"):
        state.with_steps((twice, twice))
    with pytest.raises(ValueError, match="needs 'waiting'"):
        state._updated(status="waiting_user")
    with pytest.raises(ValueError, match="must not carry"):
        state._updated(waiting=Waiting(question="?"))
    with pytest.raises(ValueError, match="names no step"):
        state._updated(current_step_id="ghost")


# -- ChatHistory ----------------------------------------------------------------------------


def _msg(role: str, text: str, *, calls: int = 0) -> Message:
    tool_calls = tuple(ToolCallRecord(id=f"c{i}", name="lookup") for i in range(calls))
    return Message.model_validate(
        {
            "role": role,
            "content": text,
            "message_id": "msg-1",
            "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
            "tool_calls": tool_calls,
        }
    )


def test_chat_history_is_capped_at_twice_max_turns() -> None:
    history = ChatHistory(max_turns=2)
    for index in range(7):
        history.add(_msg("user" if index % 2 == 0 else "assistant", str(index)))
    assert [m.content for m in history.messages] == ["3", "4", "5", "6"]
    history.rebuild([_msg("user", str(i)) for i in range(10)])
    assert [m.content for m in history.messages] == ["6", "7", "8", "9"]
    history.clear()
    assert len(history) == 0
    with pytest.raises(UsageError):
        ChatHistory(max_turns=0)


def test_chat_history_never_starts_with_an_orphan_tool_result() -> None:
    messages = [
        _msg("user", "q"),
        _msg("assistant", "", calls=2),
        _msg("tool", "r1"),
        _msg("tool", "r2"),
        _msg("assistant", "a"),
    ]
    history = ChatHistory(max_turns=1, messages=messages)
    assert [m.content for m in history.messages] == ["a"]
    history.rebuild([_msg("tool", "orphan"), _msg("user", "hi")])
    assert [m.content for m in history.messages] == ["hi"]


# -- tokens ---------------------------------------------------------------------------------


def test_cjk_estimate_exceeds_ascii_estimate_for_equal_length() -> None:
    cjk = "我想创建一个交易员并配置交易所" * 4
    ascii_text = "a" * len(cjk)
    assert estimate_tokens(cjk) == len(cjk)
    assert estimate_tokens(cjk) > estimate_tokens(ascii_text) == len(cjk) // 4
    assert estimate_tokens("") == 0
    assert estimate_tokens("こんにちは") == 5


def test_estimator_for_is_the_estimate_without_a_model_tokenizer() -> None:
    # a model with its own tokenizer (llama): tests/test_model_llama.py
    assert estimator_for(ScriptedModel(["x"])) is estimate_tokens
    assert estimator_for(object()) is estimate_tokens


# -- repository -----------------------------------------------------------------------------


def test_repository_round_trip_and_cas() -> None:
    store = InMemoryConfigStore()
    repo = MemoryRepository(store)
    empty = repo.load_task_state("agent-1", "conv-1")
    assert empty.version == 0
    assert empty.value.is_empty
    saved = repo.save_task_state(
        "agent-1",
        "conv-1",
        TaskState(current_goal="g", open_loops=("call x",)),
        expected_version=empty.version,
    )
    assert saved.version == 1
    assert saved.value.open_loops == ()
    assert store.keys() == ["task_state:agent-1:conv-1"]
    loaded = repo.load_task_state("agent-1", "conv-1")
    assert loaded == saved
    # A writer that read version 0 and writes after someone else: refused, not overwritten.
    with pytest.raises(VersionConflictError):
        repo.save_task_state("agent-1", "conv-1", TaskState(current_goal="h"), expected_version=0)
    assert repo.load_task_state("agent-1", "conv-1").value.current_goal == "g"


def test_repository_execution_state_cas_and_clear() -> None:
    store = InMemoryConfigStore()
    repo = MemoryRepository(store)
    assert repo.load_execution_state("agent-1", "conv-1") is None
    state = _full_execution_state()
    first = repo.save_execution_state("agent-1", "conv-1", state, expected_version=0)
    loaded = repo.load_execution_state("agent-1", "conv-1")
    assert loaded == first
    second = repo.save_execution_state(
        "agent-1", "conv-1", first.value.resume(), expected_version=first.version
    )
    assert second.version == 2
    with pytest.raises(VersionConflictError):
        repo.save_execution_state("agent-1", "conv-1", state, expected_version=first.version)
    with pytest.raises(UsageError, match="cannot be saved"):
        repo.save_execution_state("agent-1", "other", state, expected_version=0)
    repo.save_task_state("agent-1", "conv-1", TaskState(current_goal="g"), expected_version=0)
    repo.save_task_state("agent-1", "conv-2", TaskState(current_goal="g"), expected_version=0)
    repo.clear("agent-1", "conv-1")
    assert repo.load_execution_state("agent-1", "conv-1") is None
    assert repo.load_task_state("agent-1", "conv-1").version == 0
    assert store.keys() == ["task_state:agent-1:conv-2"]


def test_repository_names_the_key_of_an_invalid_stored_value() -> None:
    store = InMemoryConfigStore()
    store.set("execution_state:a:c", {"status": "dancing"})
    store.set("task_state:a:c", {"open_loops": "not a list"})
    repo = MemoryRepository(store)
    with pytest.raises(CorruptStateError, match=r"'execution_state:a:c'.*status") as caught:
        repo.load_execution_state("a", "c")
    assert caught.value.key == "execution_state:a:c"
    with pytest.raises(CorruptStateError, match=r"'task_state:a:c'.*open_loops"):
        repo.load_task_state("a", "c")


def test_repository_rejects_invalid_ids() -> None:
    repo = MemoryRepository(InMemoryConfigStore())
    with pytest.raises(InvalidIdError):
        repo.load_task_state("a:b", "c")
