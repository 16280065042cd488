"""State recording: every write a planner turn makes to ExecutionState and the turn log.

The ExecutionState is saved (compare-and-swap) after every change, so a new process resumes
where the last one paused. ExecutionState holds no secrets: a secret-named step argument is
stored masked, its real value in a separate ``step_secrets`` record until the flow ends (and
scrubbed from observations too); a step whose masked arguments can no longer be unmasked fails
instead of running with the masks. The turn's end is recorded here as well: the assistant
message, the conversation status, and what a failure or a cancel leaves behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agentkit.errors import AgentkitError, CorruptStateError
from agentkit.events import AgentEvent, ErrorEvent, PlanEvent
from agentkit.memory import ExecutionState, PlanStep
from agentkit.planning.state import TurnFailedError, TurnState, planned, skip_pending
from agentkit.tools import mask_secrets
from agentkit.tools.secrets import is_masked, is_secret_key
from agentkit.types import Message

__all__ = [
    "cancel_pending",
    "cancelled",
    "discard",
    "failed",
    "flush",
    "interrupted",
    "load_state",
    "persist",
    "plan_event",
    "save",
    "tool_args",
]


def load_state(turn: TurnState) -> None:
    """Read the conversation's ExecutionState (an unreadable one is discarded and noted; one
    older than the last turn's checkpoint, as a power loss leaves it, is restored first)."""
    key, memory = turn.deps.key, turn.deps.memory
    memory.unstage_execution_state(key.agent_id, key.conversation_id)  # start from the stored
    last = turn.deps.store.last_checkpoint(key)
    if memory.restore_execution_state(key.agent_id, key.conversation_id, last):
        turn.note("RESET", "execution state restored from the last turn's checkpoint")
    try:
        loaded = memory.load_execution_state(key.agent_id, key.conversation_id)
    except CorruptStateError as error:
        turn.note("RESET", f"unreadable execution state discarded: {error}")
        memory.delete_execution_state(key.agent_id, key.conversation_id)
        loaded = None
    turn.state = loaded.value if loaded else None
    turn.version = loaded.version if loaded else 0
    turn.stored_ids = {step.id for step in turn.state.steps} if turn.state else set()
    turn.raw_args = memory.load_step_secrets(key.agent_id, key.conversation_id)


def save(turn: TurnState, state: ExecutionState, *, durable: bool | None = None) -> ExecutionState:
    """Store *state* (compare-and-swap) with secret-named step arguments masked; their real
    values go to the separate ``step_secrets`` record until the flow ends.

    Durability points (see agentkit.store): a side-effecting step's state is durable before
    and after its tool (*durable* = True), and so is a state the turn pauses in (a question,
    a consent request). The state a turn ends in becomes durable with the turn's checkpoint,
    in the same journal commit as the answer (:func:`persist`; :func:`load_state` restores it
    after a power loss).

    Other states of a flow still in progress (planning, a plan stored, a harmless step
    started or done) are staged, not written (``MemoryRepository.stage_execution_state``:
    this process's readers, e.g. the workbench's plan view, see them) and written with the
    next save that is (:func:`flush`): a crash between them loses nothing a restart could
    use, since a harmless step is simply planned again."""
    if durable is None:
        durable = state.status in ("waiting_user", "waiting_confirmation")
    key, memory = turn.deps.key, turn.deps.memory
    steps, secrets = [], dict(turn.raw_args)
    for step in state.steps:
        if step.id in turn.stored_ids or not step.tool_args:  # already masked when stored
            steps.append(step)
            continue
        masked = mask_secrets(dict(step.tool_args))
        if masked != step.tool_args:
            secrets[step.id] = dict(step.tool_args)
            step = step.model_copy(update={"tool_args": masked})  # noqa: PLW2901
        steps.append(step)
    if secrets != turn.raw_args:
        memory.save_step_secrets(key.agent_id, key.conversation_id, secrets, durable=False)
        turn.raw_args = secrets
    state = state.model_copy(update={"steps": tuple(steps)})
    known = [
        value
        for args in turn.raw_args.values()
        for name, value in args.items()
        if is_secret_key(name) and isinstance(value, str)
    ]
    if known:  # e.g. the user's answer that carried the keys, kept as an observation
        state = ExecutionState.model_validate(mask_secrets(state.model_dump(mode="json"), known))
    turn.stored_ids = {step.id for step in state.steps}
    if not durable and state.is_active:
        turn.state = memory.stage_execution_state(
            key.agent_id, key.conversation_id, state, version=turn.version
        )
        turn.unsaved = True
        return turn.state
    saved = memory.save_execution_state(
        key.agent_id, key.conversation_id, state, expected_version=turn.version, durable=durable
    )
    turn.state, turn.version, turn.unsaved = saved.value, saved.version, False
    if not saved.value.is_active and turn.raw_args:  # the flow is over: forget them
        memory.save_step_secrets(key.agent_id, key.conversation_id, {})
        turn.raw_args = {}
    return saved.value


def flush(turn: TurnState) -> None:
    """Write the ExecutionState :func:`save` kept in the turn, if any (not durable)."""
    if turn.unsaved and turn.state is not None:
        key = turn.deps.key
        saved = turn.deps.memory.save_execution_state(
            key.agent_id, key.conversation_id, turn.state, expected_version=turn.version,
            durable=False,
        )  # fmt: skip
        turn.state, turn.version, turn.unsaved = saved.value, saved.version, False


def tool_args(turn: TurnState, step: PlanStep) -> dict[str, Any]:
    """The arguments to run *step* with: the real ones when the stored copy is masked."""
    if step.id in turn.raw_args:
        return turn.raw_args[step.id]
    if any(  # masked when stored, and nothing to unmask it with
        is_secret_key(name) and isinstance(value, str) and is_masked(value)
        for name, value in step.tool_args.items()
    ):
        raise TurnFailedError(
            "secrets_unavailable",
            f"the secret arguments of step {step.id!r} ({step.tool_name}) are no longer "
            "stored; please give them again",
        )
    return dict(step.tool_args)


def discard(turn: TurnState) -> None:
    """Forget the ExecutionState and its step secrets."""
    key, memory = turn.deps.key, turn.deps.memory
    memory.delete_execution_state(key.agent_id, key.conversation_id, expected_version=turn.version)
    memory.save_step_secrets(key.agent_id, key.conversation_id, {})
    turn.state, turn.version, turn.unsaved = None, 0, False
    turn.raw_args, turn.stored_ids = {}, set()


def cancel_pending(turn: TurnState, state: ExecutionState, *, answer: bool) -> None:
    """Withdraw a pending question or tool call; with *answer*, say so as the reply."""
    waiting = state.waiting
    target = waiting.confirmation_target if waiting else ""
    what = f"not run: {target}" if target else "question withdrawn"
    state = state.with_steps(skip_pending(state), plan_id=state.plan_id)
    save(turn, state.complete(f"cancelled ({what})"))
    if answer:
        turn.answer = f"OK, cancelled — {what}."


def interrupted(turn: TurnState, state: ExecutionState) -> bool:
    """Did the last turn die (a kill, a power loss) after or while running a side-effecting
    tool? Then nothing runs again by itself: the user is told what ran (and given the answer
    that was lost, when the flow had finished), a step left running is failed (it may or may
    not have run: its durable "running" save comes before the tool, "done" after) and the
    flow ends. True then: this turn ends with that answer.

    The last turn died when the flow is still planning or running (a finished turn ends,
    pauses or fails it, and a live one holds the writer lock), or when the flow changed after
    the last turn checkpoint and the last message got no answer."""
    if state.status in ("waiting_user", "waiting_confirmation"):
        return False  # paused: a step waiting for consent has not run
    tools = turn.deps.tools
    touched = [
        step
        for step in state.steps
        if step.status in ("running", "done")
        and step.tool_name in tools
        and tools.get(step.tool_name).side_effect
    ]
    if not touched:
        return False
    active = state.status in ("planning", "running")
    if not active:
        if not turn.history or turn.history[-1].role != "user":
            return False
        last = turn.deps.store.last_checkpoint(turn.deps.key)
        if turn.version <= (last.execution_state_version if last else 0):
            return False
    said = []
    for step in touched:
        args = json.dumps(mask_secrets(dict(step.tool_args)), ensure_ascii=False, sort_keys=True)
        unsure = step.status == "running"
        said.append(f"{step.tool_name} {args} {'may or may not have run' if unsure else 'ran'}")
        if unsure:
            state = state.mark_step_failed(step.id, "interrupted: it may or may not have run")
    what = "; ".join(said)
    turn.note("RESET", f"the last turn was interrupted: {what}")
    if active:
        save(turn, state.with_steps(skip_pending(state), plan_id=state.plan_id).fail(what))
    lost = f" Its answer was: {state.final_answer}" if state.final_answer else ""
    turn.answer = (
        f"My last turn was interrupted: {what}.{lost} I have not run anything again: "
        "please check, and ask again if something is still needed."
    )
    return True


def plan_event(
    turn: TurnState, goal: str, steps: tuple[PlanStep, ...], repaired: bool
) -> PlanEvent:
    """Note the new steps in the turn log; the ``plan`` event announcing them."""
    shown = [planned(step) for step in steps]
    turn.note("PLAN", json.dumps([p.to_json_dict() for p in shown], ensure_ascii=False))
    return PlanEvent(goal=goal, steps=shown, repaired=repaired)


def failed(turn: TurnState, code: str, message: str) -> Iterator[AgentEvent]:
    """The turn failed: status failed, the error noted, an active ExecutionState failed."""
    message = turn.scrub(message)
    turn.status = "failed"
    turn.answer = turn.answer or f"Sorry, I could not finish this: {message}"
    turn.deps.store.annotate(turn.deps.key, turn.message_id, "ERROR", message)
    if turn.state is not None and turn.state.is_active:
        try:
            save(turn, turn.state.fail(message))
        except Exception as error:  # already failing: report both
            message = f"{message} (and the failed state could not be saved: {error})"
    yield ErrorEvent(message=message, code=code)


def cancelled(turn: TurnState) -> Iterator[AgentEvent]:
    """The turn was cancelled: finished steps stay done, the rest are skipped."""
    turn.status = "cancelled"
    turn.answer = turn.answer or "Stopped."
    turn.deps.store.annotate(turn.deps.key, turn.message_id, "CANCEL", "cancelled by the user")
    state = turn.state
    if state is not None and state.is_active:
        save(turn, state.with_steps(skip_pending(state)).fail("cancelled"))
    yield ErrorEvent(message="the turn was cancelled", code="cancelled")


def persist(turn: TurnState) -> None:
    """The turn's end in one durable commit before ``result``: the assistant message (if there
    is an answer), the conversation's status and the turn's checkpoint, which holds the
    ExecutionState the turn ends in (so that state needs no fsync of its own)."""
    key, store = turn.deps.key, turn.deps.store
    status = "idle" if turn.status == "cancelled" else turn.status
    try:
        flush(turn)
        checkpoint = turn.deps.memory.turn_checkpoint(
            key.agent_id, key.conversation_id, turn.message_id
        )
    except AgentkitError:  # the answer comes first; the agent writes a checkpoint after it
        checkpoint = None
    if turn.answer:
        answer = Message.assistant(turn.answer, message_id=turn.message_id, usage=turn.usage)
        store.append(key, answer, status=status, checkpoint=checkpoint)
    else:
        store.set_status(key, status, checkpoint=checkpoint)
