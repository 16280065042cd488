"""τ²'s user simulator, played by any chat model (``--user-model``), inside agentkit's run.

The user's model gets what τ²'s own ``UserSimulator`` gives it: τ²'s system prompt (its
simulation guidelines — the ones with tools for a domain where the user has tools — and the
task's persona and instructions, as ``tau2.user.user_simulator`` renders them), then the
conversation as the user sees it, the roles flipped (the agent's messages are its ``user``
messages; its own messages and tool calls are ``assistant`` ones; its tools' answers are
``tool`` messages). It answers in plain text; a message holding one of τ²'s stop tokens
(``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``, checked by τ²'s own
``UserSimulator.is_stop``) ends the conversation, as τ²'s orchestrator ends it.

In a domain where the user has tools (telecom: toggling airplane mode, roaming, rebooting the
phone …), the model is offered them (natively, or as the JSON ``{"tool_calls": […]}`` form
for a backend without function calling); each call runs on the run's environment as
τ²'s orchestrator runs a user's call (requestor ``user``), and the model is asked again
with its answer, up to :data:`MAX_TOOL_CALLS` calls in a row.

A consent question of agentkit's gate is an agent message like any other: the user's model
answers it (τ²'s policies require the agent to ask for an explicit "yes" before a write).
Every model call goes through the model-call tracer, as agentkit's own simulated user's do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer
from agentkit.eval.simulator import AGENT_NAME, Move, SimTurn
from agentkit.eval.source_user import RecordingUser, SourceUser, UserContext
from agentkit.eval.tau2._package import tau2_module
from agentkit.eval.tau2.catalog import find_task
from agentkit.eval.tau2.toolset import Tau2Run, run_for
from agentkit.models.base import ChatMessage, ChatModel, Completion, ToolCallRequest, ToolSpec
from agentkit.models.request import tool_calls_of
from agentkit.telemetry import Telemetry, provider_name

__all__ = ["MAX_TOOL_CALLS", "Tau2User", "Tau2UserSource", "stop_token", "system_prompt"]

#: tool calls the user may make in a row before it must say something
MAX_TOOL_CALLS: Final = 10


def system_prompt(run: Tau2Run) -> str:
    """τ²'s user system prompt for *run*'s task (its guidelines and the task's scenario)."""
    simulator = tau2_module("user.user_simulator").UserSimulator(
        tools=_user_tools(run) or None, instructions=str(run.task.task.user_scenario)
    )
    return str(simulator.system_prompt)


def stop_token(text: str) -> str | None:
    """The stop token in *text* that τ²'s ``UserSimulator.is_stop`` ends on (None: none)."""
    message = tau2_module("data_model.message").UserMessage(role="user", content=text)
    if not tau2_module("user.user_simulator").UserSimulator.is_stop(message):
        return None
    base = tau2_module("user.base")
    return next(
        str(token) for token in (base.STOP, base.TRANSFER, base.OUT_OF_SCOPE) if token in text
    )


def _user_tools(run: Tau2Run) -> list[Any]:
    if run.env.user_tools is None:
        return []
    return list(run.env.get_user_tools())


def _specs(run: Tau2Run) -> list[ToolSpec]:
    specs = []
    for tool in _user_tools(run):
        function = tool.openai_schema["function"]
        specs.append(
            ToolSpec(
                name=function["name"],
                description=str(function.get("description") or ""),
                parameters=function.get("parameters") or {"type": "object"},
            )
        )
    return specs


def user_view(run: Tau2Run) -> list[ChatMessage]:
    """The conversation as τ²'s user sees it (roles flipped; the agent's tool calls unseen)."""
    seen: list[ChatMessage] = []
    for message in run.messages:
        role, content = message.get("role"), message.get("content")
        calls = message.get("tool_calls")
        if role == "assistant" and not calls:
            seen.append(ChatMessage(role="user", content=str(content or "")))
        elif role == "user" and calls:
            seen.append(ChatMessage(role="assistant", content=json.dumps({"tool_calls": calls})))
        elif role == "user":
            seen.append(ChatMessage(role="assistant", content=str(content or "")))
        elif role == "tool" and message.get("requestor") == "user":
            seen.append(ChatMessage(role="tool", content=str(content or "")))
    return seen


class Tau2User:
    """τ²'s user of one run, played by *model* (see the module docstring)."""

    def __init__(self, model: ChatModel, context: UserContext, key: str) -> None:
        self.model = model
        self.context = context
        self.run = run_for(context.agent_dir, find_task(key))
        self.system = system_prompt(self.run)
        self.tools = _specs(self.run)
        #: every model call the user made, in order
        self.records: list[CallRecord] = []
        self._telemetry = Telemetry(agent_id=AGENT_NAME, agent_name=AGENT_NAME)

    async def next_move(self, conversation: Sequence[SimTurn]) -> Move:
        run = self.run
        if conversation and conversation[-1].role == "agent":
            run.say("assistant", conversation[-1].text)
        for _ in range(MAX_TOOL_CALLS + 1):
            completion = await self._ask(run)
            calls = self._calls(completion)
            if calls:
                for call in calls:
                    run.call(call.name, dict(call.arguments), "user")
                continue
            text = completion.text.strip()
            run.say("user", text)
            token = stop_token(text)
            if token is not None:
                run.stop = token
                return Move("done", text)
            if not text:
                return Move("give_up", "")
            return Move("say", text)
        return Move("give_up", f"more than {MAX_TOOL_CALLS} tool calls in a row")

    def _calls(self, completion: Completion) -> tuple[ToolCallRequest, ...]:
        if not self.tools:
            return ()
        if completion.tool_calls:
            return tuple(completion.tool_calls)
        return tool_calls_of(completion.text.strip()) or ()

    async def _ask(self, run: Tau2Run) -> Completion:
        messages = [ChatMessage(role="system", content=self.system), *user_view(run)]
        trace = self._telemetry.turn(
            conversation_id=self.context.conversation_id,
            message_id=f"move-{len(self.records) + 1}",
            provider=provider_name(self.model.spec),
            model=self.model.spec,
        )
        tracer = CallTracer.standalone(
            self.model, trace=trace, records=self.records, mask=self.context.mask
        )
        try:
            async with tracer.call("chat", messages) as call:
                if self.tools and self.model.native_tools:
                    completion = await call.with_tools(self.tools)
                else:
                    completion = await call.reply()
                self.context.on_call(completion.usage)
                call.read(raw=completion.text)
        except BaseException as error:
            trace.end("failed", error_type=type(error).__qualname__, message=str(error))
            raise
        usage = tracer.usage
        trace.end(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        return completion


@dataclass(frozen=True)
class Tau2UserSource(SourceUser):
    """τ²'s user of the task *key* (``DOMAIN__POSITION``)."""

    key: str

    def simulator(self, model: ChatModel, context: UserContext) -> RecordingUser:
        return Tau2User(model, context, self.key)
