"""Simulated users: a model (or a script) plays a scenario's user, one message at a time.

After each of the agent's replies the simulator gets the persona, the goal, what the user knows
and the conversation so far, and makes a :class:`Move`: say the next message, ``done`` (the
goal is reached) or ``give_up``. The model sees the conversation with the roles swapped (the
agent's messages are its ``user`` messages, its own are ``assistant`` ones) under a system
prompt rendered from the template ``simulated_user.md``: the package's, or
``agents/{agentId}/prompts/simulated_user.md`` when the agent folder has one (placeholders
``$persona``, ``$goal``, ``$knows``, ``$language``, ``$consent``; as the planner's templates,
a placeholder an override leaves out is simply not used). It answers with JSON
(:data:`MOVE_SCHEMA`), validated like any structured reply, with one repair round.

Every model call the simulator makes goes through the model-call tracer
(:class:`~agentkit.calls.tracer.CallTracer`): each is a
:class:`~agentkit.calls.records.CallRecord` in :attr:`ModelUser.records` (the run keeps
them in its transcript) and a ``chat {model}`` span under an ``invoke_agent simulated_user``
span per move — a child of the span active when the move is asked for (the run's ``eval_run`` span).

A consent request is answered in code by the scenario's ``consent`` (``approve``: "yes" /
"好的", ``reject``: "no" / "不要"), never by the model, so a simulator cannot talk itself into
a write. Under the scripted simulator (:class:`ScriptedUser`, the scenario's ``user_script``)
every message is the script's, in order, consent answers included; its end is ``done``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer
from agentkit.errors import ModelError, StructuredOutputError, UsageError
from agentkit.eval.scenario import Scenario, SimulatedUser
from agentkit.language import LANGUAGES
from agentkit.models.base import ChatMessage, ChatModel, SessionBackend, validate_structured
from agentkit.planning.prompts import load_template
from agentkit.telemetry import Telemetry, provider_name
from agentkit.tools import SecretMask
from agentkit.types import Usage

__all__ = [
    "AGENT_NAME",
    "CONSENT_REPLIES",
    "MOVE_SCHEMA",
    "PROMPT_NAME",
    "SimTurn",
    "ModelUser",
    "Move",
    "ScriptedUser",
    "StopReason",
    "UserSimulator",
    "failure_text",
    "simulator_prompt",
    "user_model_for",
]

#: the template's name: ``simulated_user.md`` in the package, overridable per agent folder
PROMPT_NAME = "simulated_user"
#: the agent name on the simulator's ``invoke_agent`` spans
AGENT_NAME = "simulated_user"

#: why a simulated conversation ended (the ``sim_stopped_by`` column)
StopReason = Literal["user_done", "user_gave_up", "max_turns", "error", "budget"]
#: what the simulated user answers a consent request, by language and the scenario's policy
CONSENT_REPLIES: dict[str, dict[str, str]] = {
    lang.code: {"approve": lang.approve_reply, "reject": lang.reject_reply} for lang in LANGUAGES
}
_LANGUAGES = {lang.code: lang.name or lang.code for lang in LANGUAGES}
_CONSENT_TEXT = {
    "approve": "When the assistant asks you to confirm an action, you approve it.",
    "reject": "When the assistant asks you to confirm an action, you refuse it.",
}
_START = "(The conversation has not started yet: write your first message to the assistant.)"
MOVE_SCHEMA: dict[str, object] = {
    "title": "simulated_user_move",
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["say", "done", "give_up"]},
        "message": {"type": "string"},
    },
    "required": ["action", "message"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Move:
    """The simulated user's next move: a message, or the end of the conversation."""

    action: Literal["say", "done", "give_up"]
    message: str = ""


@dataclass(frozen=True, slots=True)
class SimTurn:
    """One message of the conversation as the simulator sees it."""

    role: Literal["user", "agent"]
    text: str
    #: the agent's message asks the user to confirm a side-effecting tool call
    consent: bool = False


class UserSimulator(Protocol):
    """What plays the user: the next move after *conversation* (empty: the first message)."""

    async def next_move(self, conversation: Sequence[SimTurn]) -> Move: ...


class ScriptedUser:
    """The scenario's ``user_script``: its lines in order, then ``done``."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = tuple(lines)

    async def next_move(self, conversation: Sequence[SimTurn]) -> Move:
        sent = sum(1 for item in conversation if item.role == "user")
        if sent < len(self.lines):
            return Move("say", self.lines[sent])
        return Move("done")


def simulator_prompt(user: SimulatedUser, language: str, agent_dir: Path | None = None) -> str:
    """The simulator's system prompt for *user* (the agent folder's template, if it has one)."""
    template = load_template(PROMPT_NAME, agent_dir, package="agentkit.eval")
    knows = "\n".join(
        f"- {key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in user.knows.items()
    )
    return template.safe_substitute(
        persona=user.persona,
        goal=user.goal,
        knows=knows or "- (nothing in particular)",
        language=_LANGUAGES.get(language, language),
        consent=_CONSENT_TEXT[user.consent],
    ).strip()


class ModelUser:
    """A chat model plays *user*; *on_call* is told each call's usage (the run's budget).

    *conversation_id* names the conversation on the simulator's spans; *mask* masks what the
    records and spans keep (the secrets the agent knows)."""

    def __init__(
        self,
        model: ChatModel,
        user: SimulatedUser,
        *,
        language: str,
        agent_dir: Path | None = None,
        on_call: Callable[[Usage], None] | None = None,
        conversation_id: str = "",
        mask: SecretMask | None = None,
    ) -> None:
        self.model = model
        self.user = user
        self.language = language
        self.system = simulator_prompt(user, language, agent_dir)
        self.on_call = on_call
        self.conversation_id = conversation_id
        self.mask = mask
        #: every model call the simulator made, in order
        self.records: list[CallRecord] = []
        self._telemetry = Telemetry(agent_id=AGENT_NAME, agent_name=AGENT_NAME)

    def messages(self, conversation: Sequence[SimTurn]) -> list[ChatMessage]:
        """What the model is sent: the prompt, then the conversation with the roles swapped."""
        sent = [ChatMessage(role="system", content=self.system)]
        if not conversation:
            sent.append(ChatMessage(role="user", content=_START))
        for item in conversation:
            role: Literal["user", "assistant"] = "user" if item.role == "agent" else "assistant"
            sent.append(ChatMessage(role=role, content=item.text))
        return sent

    async def next_move(self, conversation: Sequence[SimTurn]) -> Move:
        if conversation and conversation[-1].role == "agent" and conversation[-1].consent:
            replies = CONSENT_REPLIES.get(self.language, CONSENT_REPLIES["en"])
            return Move("say", replies[self.user.consent])
        if not conversation and self.user.opening is not None:
            return Move("say", self.user.opening)
        messages = self.messages(conversation)
        trace = self._telemetry.turn(
            conversation_id=self.conversation_id,
            message_id=f"move-{sum(1 for item in conversation if item.role == 'user') + 1}",
            provider=provider_name(self.model.spec),
            model=self.model.spec,
        )
        tracer = CallTracer.standalone(
            self.model, trace=trace, records=self.records, mask=self.mask
        )
        try:
            move = await self._moves(tracer, messages)
        except BaseException as error:
            trace.end("failed", error_type=type(error).__qualname__, message=str(error))
            raise
        usage = tracer.usage
        trace.end(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        return move

    async def _moves(self, tracer: CallTracer, messages: list[ChatMessage]) -> Move:
        """Ask for the next move, with one repair round."""
        for attempt in range(2):
            try:
                move = await self._ask(tracer, messages)
            except StructuredOutputError as error:
                if attempt:
                    raise
                messages = [
                    *messages,
                    ChatMessage(role="assistant", content=error.raw[:2000]),
                    ChatMessage(
                        role="user",
                        content=f"That reply was not valid ({error.problem}). Reply with the "
                        'JSON only: {"action": "say" | "done" | "give_up", "message": "…"}.',
                    ),
                ]
                continue
            return move
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ask(self, tracer: CallTracer, messages: list[ChatMessage]) -> Move:
        """One model call through *tracer*: its record and span are made whatever happens."""
        async with tracer.call("chat", messages, MOVE_SCHEMA) as call:
            try:
                completion = await call.reply()
            except ModelError:
                if self.on_call is not None:
                    self.on_call(Usage())  # a call was made: it counts, its tokens are unknown
                raise
            if self.on_call is not None:
                self.on_call(completion.usage)
            try:
                value = validate_structured(self.model.spec, completion.text, MOVE_SCHEMA)
                move = _move(self.model.spec, value, completion.text)
            except StructuredOutputError as error:
                call.read(raw=completion.text, error=error.problem)
                raise
            call.read(raw=completion.text, parsed=value)
            return move


def _move(spec: str, value: dict[str, object], text: str) -> Move:
    """The move a validated reply *value* makes (a ``say`` without a message is invalid)."""
    action = value["action"]
    message = str(value.get("message", "")).strip()
    if action == "say" and not message:
        raise StructuredOutputError(spec or "simulator", "action 'say' needs a message", text)
    if action == "say":
        return Move("say", message)
    return Move("done" if action == "done" else "give_up", message)


def failure_text(error: ModelError) -> str:
    """A simulator failure, for the row's ``error``."""
    return f"the simulated user failed: {error}"


def user_model_for(
    scenario: Scenario,
    agent_model: str | ChatModel | SessionBackend,
    user_model: str | ChatModel | None,
) -> str | ChatModel | None:
    """Who plays *scenario*'s user (checked before any run): *user_model* (``--user-model``),
    else the run's model; ``scripted`` means the scenario's ``user_script``. None for a
    scenario with fixed turns. A scenario that cannot run so is a UsageError."""
    from agentkit.models.spec import parse_model_spec

    if scenario.simulated_user is None:
        return None
    chosen: str | ChatModel | SessionBackend = user_model if user_model is not None else agent_model
    where = f"scenario {scenario.id!r}"
    if agent_model == "scripted" and scenario.script is None:
        raise UsageError(
            f"{where} has no script for the agent's replies: it cannot run with --model scripted"
        )
    if chosen == "scripted":
        if not scenario.user_script:
            raise UsageError(
                f"{where} has no user_script: its simulated user needs --user-model SPEC "
                "under --model scripted"
            )
        return "scripted"
    if isinstance(chosen, str):
        parse_model_spec(chosen)  # ModelSpecError (a UsageError) before any run
        return chosen
    if not isinstance(chosen, ChatModel):
        raise UsageError(f"{where}: the simulated user needs a chat model, not {chosen.spec!r}")
    return chosen
