"""The flow recorder: the only writer of a conversation's ExecutionState during a turn.

The ExecutionState is saved (compare-and-swap) after every change, so a new process resumes
where the last one paused. ExecutionState holds no secrets: a secret-named step argument is
stored masked, its real value in a separate ``step_secrets`` record until the flow ends (and
scrubbed from observations too); a step whose masked arguments can no longer be unmasked fails
instead of running with the masks.

Durability points (see agentkit.store): a side-effecting step's state is durable before and
after its tool, and so is a state the turn pauses in (a question, a consent request). The
state a turn ends in is written once, at the turn's end (:meth:`FlowRecorder.flush`, in the
end's store call), and becomes durable with the turn's checkpoint, in the same journal commit
as the answer (:meth:`FlowRecorder.load` restores it after a power loss). Every other state
is staged in memory, not written (:meth:`MemoryRepository.stage_execution_state
<agentkit.memory.MemoryRepository.stage_execution_state>`: this process's readers see it),
and written with the next save that is a durability point, or at the turn's end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentkit.calls.errors import TurnFailedError
from agentkit.calls.secrets import is_masked, is_secret_key
from agentkit.errors import CorruptStateError
from agentkit.memory import ExecutionState, MemoryRepository, PlanStep
from agentkit.store import ConversationKey, TurnCheckpoint
from agentkit.tools import SecretMask, ToolRegistry, mask_secrets
from agentkit.types import Message

__all__ = ["FlowRecorder"]


class FlowRecorder:
    """One conversation's ExecutionState as a turn changes it (see the module docstring)."""

    def __init__(
        self,
        key: ConversationKey,
        memory: MemoryRepository,
        note: Callable[[str, str], None],
        mask: SecretMask | None = None,
    ) -> None:
        self.key = key
        self.memory = memory
        self.note = note
        #: masks the flow's own texts (goal, answer, errors, the question) on every save
        self.mask = mask or SecretMask()
        #: the ExecutionState and the version it was stored at; *unsaved* while ``state`` is
        #: a later, staged one (see :meth:`save`)
        self.state: ExecutionState | None = None
        self.version = 0
        self.unsaved = False
        #: real arguments of steps whose stored copy is masked, and the ids of the steps
        #: already stored (their arguments are masked: never split them again)
        self.raw_args: dict[str, dict[str, Any]] = {}
        self.stored_ids: set[str] = set()
        #: the conversation's last turn checkpoint (read once, by :meth:`load`)
        self.checkpoint: TurnCheckpoint | None = None

    @property
    def current(self) -> ExecutionState:
        """The ExecutionState as recorded now, or an empty one."""
        return self.state if self.state is not None else ExecutionState()

    def load(self, last: TurnCheckpoint | None) -> ExecutionState | None:
        """Read the conversation's ExecutionState (an unreadable one is discarded and noted;
        one older than *last*, the last turn's checkpoint, as a power loss leaves it, is
        restored first)."""
        key, memory = self.key, self.memory
        self.checkpoint = last
        memory.unstage_execution_state(key.agent_id, key.conversation_id)  # from the stored
        if memory.restore_execution_state(key.agent_id, key.conversation_id, last):
            self.note("RESET", "execution state restored from the last turn's checkpoint")
        try:
            loaded = memory.load_execution_state(key.agent_id, key.conversation_id)
        except CorruptStateError as error:
            self.note("RESET", f"unreadable execution state discarded: {error}")
            memory.delete_execution_state(key.agent_id, key.conversation_id)
            loaded = None
        self.state = loaded.value if loaded else None
        self.version = loaded.version if loaded else 0
        self.stored_ids = {step.id for step in self.state.steps} if self.state else set()
        self.raw_args = memory.load_step_secrets(key.agent_id, key.conversation_id)
        self.mask.learn(self._secret_values())
        return self.state

    def save(self, state: ExecutionState, *, durable: bool | None = None) -> ExecutionState:
        """Store *state* (compare-and-swap) with secret-named step arguments masked; their
        real values go to the separate ``step_secrets`` record until the flow ends. Paused
        states are durable by default; see the module docstring for the rest."""
        if durable is None:
            durable = state.status in ("waiting_user", "waiting_confirmation")
        key, memory = self.key, self.memory
        steps, secrets = [], dict(self.raw_args)
        for step in state.steps:
            if step.id in self.stored_ids or not step.tool_args:  # already masked when stored
                steps.append(step)
                continue
            masked = self.mask.json(dict(step.tool_args))
            if masked != step.tool_args:
                secrets[step.id] = dict(step.tool_args)
                step = step.model_copy(update={"tool_args": masked})  # noqa: PLW2901
            steps.append(step)
        if secrets != self.raw_args:
            memory.save_step_secrets(key.agent_id, key.conversation_id, secrets, durable=False)
            self.raw_args = secrets
        state = state.model_copy(update={"steps": tuple(steps), **self._masked_texts(state)})
        known = self._secret_values()
        self.mask.learn(known)  # the turn masks them wherever it writes or shows text
        if known:  # e.g. the user's answer that carried the keys, kept as an observation
            state = ExecutionState.model_validate(
                mask_secrets(state.model_dump(mode="json"), known)
            )
        self.stored_ids = {step.id for step in state.steps}
        if not durable:  # staged: written at the next durability point or the turn's end
            self.state = memory.stage_execution_state(
                key.agent_id, key.conversation_id, state, version=self.version
            )
            self.unsaved = True
            return self.state
        return self._write(state, durable=True)

    def _write(self, state: ExecutionState, *, durable: bool) -> ExecutionState:
        key, memory = self.key, self.memory
        saved = memory.save_execution_state(
            key.agent_id, key.conversation_id, state, expected_version=self.version,
            durable=durable,
        )  # fmt: skip
        self.state, self.version, self.unsaved = saved.value, saved.version, False
        if not saved.value.is_active and self.raw_args:  # the flow is over: forget them
            memory.save_step_secrets(key.agent_id, key.conversation_id, {})
            self.raw_args = {}
        return saved.value

    def _secret_values(self) -> list[str]:
        """The real values the stored arguments mask (secret-named, or a secret's format)."""
        return [
            value
            for args in self.raw_args.values()
            for name, value in args.items()
            if isinstance(value, str) and (is_secret_key(name) or self.mask.text(value) != value)
        ]

    def _masked_texts(self, state: ExecutionState) -> dict[str, object]:
        """The flow's free texts, masked (a request's keys never reach its goal)."""
        mask = self.mask.text
        changed: dict[str, object] = {}
        for name in ("goal", "final_answer", "last_error"):
            value: str = getattr(state, name)
            masked = mask(value)
            if masked != value:
                changed[name] = masked
        waiting = state.waiting
        if waiting is not None and mask(waiting.question) != waiting.question:
            changed["waiting"] = waiting.model_copy(update={"question": mask(waiting.question)})
        return changed

    def carry(self, state: ExecutionState) -> None:
        """Take *state* as the current one without writing it: the next :meth:`save` (a
        step's durable "running" point) writes it with its own change."""
        self.state = state

    def replace_args(
        self, state: ExecutionState, step_id: str, args: dict[str, Any]
    ) -> ExecutionState:
        """*state* with step *step_id*'s arguments replaced by *args* (an approved edit, a call
        filled from an answer): the stored copy masked, the real values kept beside it as for
        a planned step."""
        masked = self.mask.json(dict(args))
        if masked != args:
            raw = {**self.raw_args, step_id: dict(args)}
        else:
            raw = {k: v for k, v in self.raw_args.items() if k != step_id}
        if raw != self.raw_args:  # kept for a later turn too (a consent given after this one)
            key = self.key
            self.memory.save_step_secrets(key.agent_id, key.conversation_id, raw, durable=False)
            self.raw_args = raw
        steps = tuple(
            step.model_copy(update={"tool_args": masked}) if step.id == step_id else step
            for step in state.steps
        )
        return state.model_copy(update={"steps": steps})

    def flush(self) -> None:
        """Write the ExecutionState :meth:`save` staged, if any (not durable: the turn's end
        commit, right after, holds it in its checkpoint)."""
        if self.unsaved and self.state is not None:
            self._write(self.state, durable=False)

    def tool_args(self, step: PlanStep) -> dict[str, Any]:
        """The arguments to run *step* with: the real ones when the stored copy is masked."""
        if step.id in self.raw_args:
            return self.raw_args[step.id]
        if any(  # masked when stored, and nothing to unmask it with
            isinstance(value, str) and is_masked(value) for value in step.tool_args.values()
        ):
            raise TurnFailedError(
                "secrets_unavailable",
                f"the secret arguments of step {step.id!r} ({step.tool_name}) are no longer "
                "stored; please give them again",
            )
        return dict(step.tool_args)

    def discard(self) -> None:
        """Forget the ExecutionState and its step secrets."""
        key, memory = self.key, self.memory
        memory.delete_execution_state(
            key.agent_id, key.conversation_id, expected_version=self.version
        )
        memory.save_step_secrets(key.agent_id, key.conversation_id, {})
        self.state, self.version, self.unsaved = None, 0, False
        self.raw_args, self.stored_ids = {}, set()

    def cancel_pending(self, state: ExecutionState) -> str:
        """Withdraw a pending question or tool call; returns what was withdrawn."""
        waiting = state.waiting
        target = waiting.confirmation_target if waiting else ""
        what = f"not run: {target}" if target else "question withdrawn"
        state = state.with_steps(skip_pending(state), plan_id=state.plan_id)
        self.save(state.complete(f"cancelled ({what})"))
        return what

    def interrupted(
        self, state: ExecutionState, tools: ToolRegistry, history: Sequence[Message]
    ) -> str | None:
        """Did the last turn die (a kill, a power loss) after or while running a
        side-effecting tool? Then nothing runs again by itself: the answer (returned) tells
        the user what ran (and the answer that was lost, when the flow had finished), a step
        left running is failed (it may or may not have run: its durable "running" save comes
        before the tool, "done" after) and the flow ends. None when it did not.

        The last turn died when the flow is still planning or running (a finished turn
        ends, pauses or fails it, and a live one holds the writer lock), or when the flow
        changed after the last turn checkpoint and the last message got no answer."""
        if state.status in ("waiting_user", "waiting_confirmation"):
            return None  # paused: a step waiting for consent has not run
        touched = [
            step
            for step in state.steps
            if step.status in ("running", "done")
            and step.tool_name in tools
            and tools.get(step.tool_name).side_effect
        ]
        if not touched:
            return None
        active = state.status in ("planning", "running")
        if not active:
            if not history or history[-1].role != "user":
                return None
            last = self.checkpoint
            if self.version <= (last.execution_state_version if last else 0):
                return None
        said = []
        for step in touched:
            args = json.dumps(
                self.mask.json(dict(step.tool_args)), ensure_ascii=False, sort_keys=True
            )
            unsure = step.status == "running"
            said.append(f"{step.tool_name} {args} {'may or may not have run' if unsure else 'ran'}")
            if unsure:
                state = state.mark_step_failed(step.id, "interrupted: it may or may not have run")
        what = "; ".join(said)
        self.note("RESET", f"the last turn was interrupted: {what}")
        if active:
            self.save(state.with_steps(skip_pending(state), plan_id=state.plan_id).fail(what))
        lost = f" Its answer was: {state.final_answer}" if state.final_answer else ""
        return (
            f"My last turn was interrupted: {what}.{lost} I have not run anything again: "
            "please check, and ask again if something is still needed."
        )

    def end(self, how: str) -> None:
        """An active flow ends with the turn (a failure or a cancel): pending steps skipped."""
        state = self.state
        if state is not None and state.is_active:
            self.save(state.with_steps(skip_pending(state)).fail(how))


def skip_pending(state: ExecutionState, keep: str = "") -> tuple[PlanStep, ...]:
    """The steps with every pending (or paused) step other than *keep* marked skipped."""
    return tuple(
        step.model_copy(update={"status": "skipped"})
        if step.status in ("pending", "running") and step.id != keep
        else step
        for step in state.steps
    )
