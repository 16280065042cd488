"""agentkit's values as ACP's own types: prompts in, session updates and usage out.

Pure functions, no I/O, so the mapping can be read (and tested) in one place:

=================================  ==========================================================
agentkit                           ACP
=================================  ==========================================================
prompt content blocks              one message text (text, resource links, embedded text)
``agent_output``                   ``agent_message_chunk``
``thinking``, notes                ``agent_thought_chunk``
``tool_call`` / ``tool_result``    ``tool_call`` (in_progress) / ``tool_call_update``
                                   (completed or failed, raw output), secrets masked
a consent request                  a ``tool_call`` (pending, kind edit) shown with the
                                   permission request
ExecutionState steps               ``plan`` (every entry's status; skipped steps left out)
conversation stats                 ``Usage`` (cumulative tokens of the conversation)
history (``session/load``)         ``user_message_chunk`` / ``agent_message_chunk``
=================================  ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    PlanEntry,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    Usage,
    UserMessageChunk,
)
from pydantic import JsonValue, TypeAdapter, ValidationError

from agentkit.calls.secrets import mask_secrets
from agentkit.errors import UsageError
from agentkit.events import ToolCallEvent, ToolResultEvent
from agentkit.memory import ExecutionState
from agentkit.types import ConversationStats, Message

__all__ = [
    "ContentBlock",
    "SessionUpdate",
    "agent_text",
    "consent_call",
    "consent_done",
    "history_updates",
    "plan_entries",
    "plan_update",
    "prompt_text",
    "thought",
    "tool_finished",
    "tool_started",
    "usage_of",
]

ContentBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
)
_BLOCKS: Final[TypeAdapter[list[ContentBlock]]] = TypeAdapter(list[ContentBlock])


def _clean(text: str) -> str:
    """Text safe to store: lone surrogates (legal in JSON escapes, not in UTF-8) replaced."""
    return text.encode("utf-8", "replace").decode("utf-8")


def prompt_text(prompt: object) -> str:
    """One message from a prompt's content blocks.

    Text is taken as it is, a resource link as ``[name](uri)``, an embedded text resource as
    its text under its URI. Images, audio and binary resources are refused (the agent does not
    advertise them). *prompt* is validated again here: the library lets ``_meta`` keys
    replace validated parameters, so a handler cannot trust their types.
    """
    try:
        blocks = _BLOCKS.validate_python(prompt)
    except ValidationError as error:
        problems = error.error_count()
        raise UsageError(f"prompt: not a list of content blocks ({problems} problems)") from None
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.title or block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            parts.append(f"Context from {block.resource.uri}:\n{block.resource.text}")
        else:
            raise UsageError(
                f"prompt: {block.type} content is not supported; send text, resource links "
                "or embedded text resources"
            )
    return _clean("\n\n".join(part for part in parts if part.strip()))


def agent_text(text: str) -> AgentMessageChunk:
    return update_agent_message_text(text)


def thought(text: str) -> AgentThoughtChunk:
    return update_agent_thought_text(text)


def _masked(arguments: dict[str, Any]) -> JsonValue:
    return mask_secrets(json.loads(json.dumps(arguments, default=str)))


def _output_value(output: str) -> JsonValue:
    """A tool's output as JSON when it is JSON (masked again: masking is idempotent)."""
    try:
        value: JsonValue = json.loads(output)
    except ValueError:
        return mask_secrets(output)
    return mask_secrets(value)


def tool_started(call_id: str, event: ToolCallEvent, kind: ToolKind) -> ToolCallStart:
    return start_tool_call(
        call_id,
        event.name,
        kind=kind,
        status="in_progress",
        raw_input=_masked(event.arguments),
    )


def tool_finished(call_id: str, event: ToolResultEvent) -> ToolCallProgress:
    output = _output_value(event.output)
    shown = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return update_tool_call(
        call_id,
        status="completed" if event.ok else "failed",
        content=[tool_content(text_block(shown))],
        raw_output=output,
    )


def consent_call(
    call_id: str, tool_name: str, tool_args: dict[str, Any], question: str
) -> ToolCallStart:
    """The side-effecting call the planner wants to run, waiting for the user's decision."""
    return start_tool_call(
        call_id,
        tool_name,
        kind="edit",
        status="pending",
        content=[tool_content(text_block(question))],
        raw_input=_masked(tool_args),
    )


def consent_done(call_id: str, note: str) -> ToolCallProgress:
    """A consent request that ended without the tool running (rejected, unanswered)."""
    return update_tool_call(call_id, status="failed", content=[tool_content(text_block(note))])


def plan_entries(state: ExecutionState) -> list[PlanEntry]:
    """The plan as ACP entries, in step order: running → in_progress, done and failed →
    completed (a failed step says so), skipped steps (replaced by a replan) left out."""
    entries: list[PlanEntry] = []
    for step in state.steps:
        if step.status == "skipped":
            continue
        content = step.title or step.tool_name or step.instruction or step.id
        if step.status == "failed":
            content = f"{content} (failed)"
        status: Literal["pending", "in_progress", "completed"] = "completed"
        if step.status in ("pending", "running"):
            status = "pending" if step.status == "pending" else "in_progress"
        entries.append(plan_entry(content, status=status))
    return entries


def plan_update(entries: Sequence[PlanEntry]) -> AgentPlanUpdate:
    return update_plan(entries)


def usage_of(stats: ConversationStats) -> Usage:
    """The conversation's cumulative tokens (ACP's prompt-response usage is per session)."""
    return Usage(
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        total_tokens=stats.input_tokens + stats.output_tokens,
    )


def history_updates(messages: Sequence[Message]) -> list[SessionUpdate]:
    """A stored conversation as the updates ``session/load`` replays: each user message, each
    reply (with the tool calls recorded on it); compression markers and notes left out."""
    updates: list[SessionUpdate] = []
    for message in messages:
        if message.role == "user":
            updates.append(update_user_message_text(message.content))
        elif message.role == "assistant":
            for call in message.tool_calls:
                updates.append(
                    start_tool_call(
                        f"{message.message_id}-{call.id}",
                        call.name,
                        kind="other",
                        status="completed" if call.ok else "failed",
                        raw_input=_masked(call.arguments),
                    )
                )
            if message.content:
                updates.append(agent_text(message.content))
    return updates
