"""Replaying a recorded planner turn with edited prompt templates (the prompt lab's engine).

A planner turn traces every model call to ``{messageId}/calls.jsonl`` with the exact messages
sent, but not the values that filled the template. To replay a call with an edited template,
:func:`template_values` recovers those values by matching the recorded prompt against the
template it was rendered from (tried in order: the agent's current template, the package
default) and accepts a match only if rendering the values again gives back the recorded prompt
*exactly*. The edited template is then rendered with the same values, so the replay sends the
same inputs in new words: the system message and everything else of the call are unchanged;
only the user message holding the rendered template is replaced.

When no known template reproduces a recorded prompt (say the override was changed after the
turn), exact re-rendering is not possible from the trace: that call is replayed with its
recorded messages unchanged and ``template=""``, never with guessed values. If a
value itself contains the literal text that follows its placeholder, the split is the first
one that reproduces the prompt; that only matters for an edit that separates the two.

Repair calls (the runtime's second try after an unusable reply) are not replayed on their own:
a replayed ``plan`` whose reply does not validate gets one repair round, as in the runtime.
Replaying writes nothing; :func:`save_prompt_override` writes an agent's override atomically.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template

from pydantic import JsonValue

from agentkit.calls.cancel import CancelScope
from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer
from agentkit.errors import ModelError, StoreError, StructuredOutputError, UsageError
from agentkit.layout import AgentPaths
from agentkit.models.base import ChatMessage, ChatModel, Completion
from agentkit.planning.plan import PlanFormatError, extract_json, parse_plan
from agentkit.planning.prompts import PROMPT_NAMES, load_prompt
from agentkit.planning.state import STAGE_TIMEOUTS
from agentkit.store.base import ConversationKey, ConversationStore
from agentkit.tools import SecretMask, ToolRegistry

__all__ = [
    "REPLAYED_PURPOSES",
    "PromptTemplateError",
    "ReplayedCall",
    "TraceError",
    "TraceNotFoundError",
    "check_template",
    "load_call_records",
    "prompt_placeholders",
    "replay_turn",
    "save_prompt_override",
    "template_values",
]

#: the purposes replayed: each prompt is a planner template. ``act`` (strategy ``tool_loop``) is
#: left out: a native function call needs the tool specs, which the trace does not record.
REPLAYED_PURPOSES: tuple[str, ...] = ("plan", "replan", "classify", "reason", "respond")
_REPAIR_REPLY_CHARS = 4000


class TraceError(UsageError):
    """A turn's ``calls.jsonl`` cannot be used (unreadable or a malformed line)."""


class TraceNotFoundError(TraceError, LookupError):
    """The turn has no trace (not a planner turn, or a turn that made no model call)."""

    def __init__(self, key: ConversationKey, message_id: str) -> None:
        self.key = key
        self.message_id = message_id
        super().__init__(
            f"no model calls recorded for turn {message_id} of {key} "
            "(only planner turns trace their calls)"
        )


class PromptTemplateError(UsageError):
    """An edited template that cannot be used: bad ``$`` syntax or an unknown placeholder."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"prompt template {name!r}: {problem}")


# -- traces -----------------------------------------------------------------------------------


def load_call_records(
    store: ConversationStore, key: ConversationKey, message_id: str
) -> list[CallRecord]:
    """The model calls of turn *message_id*, in call order, as the store traced them
    (:meth:`ConversationStore.trace`; the one reader of traces). Raises
    :class:`TraceNotFoundError` when there are none, :class:`TraceError` for a bad line."""
    try:
        lines = store.call_records(key, message_id)
    except StoreError as error:
        raise TraceError(
            f"the trace of turn {message_id} of {key} cannot be read: {error}"
        ) from None
    if not lines:
        raise TraceNotFoundError(key, message_id)
    records: list[CallRecord] = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(CallRecord.from_json_line(line))
        except ValueError as error:  # not JSON, or not a call record
            raise TraceError(
                f"the trace of turn {message_id} of {key}: line {number} is not a call "
                f"record: {error}"
            ) from None
    return records


# -- templates --------------------------------------------------------------------------------


@cache
def prompt_placeholders(name: str) -> frozenset[str]:
    """The placeholders the runtime fills for template *name*: those of the package default
    (each default uses every value the runtime passes)."""
    if name not in PROMPT_NAMES:
        raise PromptTemplateError(
            name, f"is not a planner prompt (known: {', '.join(PROMPT_NAMES)})"
        )
    text = resources.files("agentkit.planning").joinpath(f"prompts/{name}.md").read_text("utf-8")
    return frozenset(Template(text).get_identifiers())


def _line_and_column(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def check_template(name: str, text: str) -> Template:
    """*text* as template *name*, checked: a stray ``$`` (write ``$$`` for a dollar sign) and a
    placeholder the runtime does not fill are :class:`PromptTemplateError`."""
    known = prompt_placeholders(name)
    template = Template(text)
    for match in template.pattern.finditer(text):
        if match.group("invalid") is not None:
            line, column = _line_and_column(text, match.start())
            raise PromptTemplateError(
                name, f"a '$' at line {line}, column {column} starts no placeholder (use '$$')"
            )
    unknown = sorted(set(template.get_identifiers()) - known)
    if unknown:
        names = ", ".join(f"${item}" for item in unknown)
        raise PromptTemplateError(
            name,
            f"unknown placeholder {names}; this prompt is filled with: "
            + ", ".join(f"${item}" for item in sorted(known)),
        )
    return template


def template_values(text: str, rendered: str) -> dict[str, str] | None:
    """The values that turn template *text* into *rendered* (as ``render_prompt`` does:
    ``safe_substitute`` then strip), or None when the template cannot produce it."""
    template = Template(text)
    body = text.strip()
    parts: list[str] = []
    seen: set[str] = set()
    position = 0
    for match in template.pattern.finditer(body):
        parts.append(re.escape(body[position : match.start()]))
        name = match.group("named") or match.group("braced")
        if name is None:  # "$$", or a stray "$" that safe_substitute leaves as is
            parts.append(re.escape("$"))
        elif name in seen:
            parts.append(f"(?P={name})")
        else:
            parts.append(f"(?P<{name}>.*?)")
            seen.add(name)
        position = match.end()
    parts.append(re.escape(body[position:]))
    found = re.fullmatch("".join(parts), rendered, flags=re.DOTALL)
    if found is None:
        return None
    values = {name: value for name, value in found.groupdict().items() if value is not None}
    if template.safe_substitute(values).strip() != rendered:
        return None
    return values


def save_prompt_override(agent_dir: Path, name: str, text: str) -> Path:
    """Write *text* as the agent's ``prompts/{name}.md`` override, atomically (a temporary file
    in the same folder, then ``os.replace``), after :func:`check_template`."""
    check_template(name, text)
    files = AgentPaths(agent_dir)
    folder = files.prompts_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = files.prompt(name)
    content = text if text.endswith("\n") else text + "\n"
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


# -- replay -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayedCall:
    """One recorded call and its replay.

    ``index`` is the call's position in ``calls.jsonl``; ``old_*`` describe what the turn got
    (after its repair round, if it had one), ``new_*`` what the replay got. ``problem`` says why
    the new reply is unusable (empty when it is usable), ``error`` why the model failed.
    """

    index: int
    purpose: str
    #: the template that rendered the recorded prompt ("" when none reproduces it)
    template: str
    messages: tuple[ChatMessage, ...]
    old_raw: str
    old_parsed: JsonValue
    new_raw: str = ""
    new_parsed: JsonValue = None
    problem: str = ""
    error: str = ""
    repaired: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0


def _prompt_position(messages: Sequence[Mapping[str, str]]) -> int | None:
    return next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)


def _is_repair(record: CallRecord) -> bool:
    return sum(1 for m in record.messages if m.get("role") == "user") > 1


def _candidate_names(purpose: str) -> list[str]:
    """Templates that may have rendered a call of *purpose*, the likeliest first (a ``plan``
    call is rendered from ``next_step`` under that strategy)."""
    first = [purpose, "next_step"] if purpose == "plan" else [purpose]
    rest = [name for name in PROMPT_NAMES if name not in first and name != "repair"]
    return [name for name in first if name in PROMPT_NAMES] + rest


def _new_messages(
    record: CallRecord, templates: Mapping[str, str], agent_dir: Path | None
) -> tuple[list[ChatMessage], str]:
    """The call's messages with its prompt re-rendered, and the template's name ("" when no
    known template reproduces the recorded prompt: the messages are then the recorded ones)."""
    messages = [ChatMessage.model_validate(m) for m in record.messages]
    position = _prompt_position(record.messages)
    if position is None:
        return messages, ""
    recorded = messages[position].content
    for name in _candidate_names(record.purpose):
        sources = [agent_dir, None] if agent_dir is not None else [None]
        for source in sources:
            original = load_prompt(name, source).template
            values = template_values(original, recorded)
            if values is None:
                continue
            text = templates.get(name, original)
            rendered = Template(text).safe_substitute(values).strip()
            messages[position] = ChatMessage(role="user", content=rendered)
            return messages, name
    return messages, ""


def _check_plan(
    value: JsonValue, tools: ToolRegistry | None, max_steps: int, *, batch: bool
) -> str:
    if tools is None:
        return "" if isinstance(value, dict) else "the plan must be a JSON object"
    try:
        parse_plan(value, tools, max_steps, batch=batch)
    except PlanFormatError as error:
        return error.problem
    return ""


@dataclass
class _Replayer:
    model: ChatModel
    templates: Mapping[str, str]
    agent_dir: Path | None
    tools: ToolRegistry | None
    max_steps: int
    timeouts: Mapping[str, float]
    elapsed: float = 0.0

    async def ask(
        self, record: CallRecord, messages: list[ChatMessage]
    ) -> tuple[Completion | None, str, str]:
        """``(completion, raw, error)``: the reply is read once, by :meth:`judge`, as the
        runtime reads it (leniently extracted, then checked against the reply type)."""
        limit = self.timeouts.get(record.purpose, 36.0)
        tracer = CallTracer(
            model=self.model,
            message_id="replay",
            timeout=lambda purpose: limit,
            mask=SecretMask(),
            cancel=CancelScope(),
        )
        try:
            async with tracer.call(record.purpose, messages, record.schema_) as call:
                completion = await call.reply()
        except StructuredOutputError as error:  # a backend that checks the schema itself
            return None, error.raw, ""
        except TimeoutError:
            return None, "", f"timed out after {limit:g} s (the {record.purpose} stage's limit)"
        except ModelError as error:
            return None, "", str(error)
        finally:
            self.elapsed += sum(traced.latency_ms for traced in tracer.records) / 1000
        return completion, completion.text, ""

    def judge(self, record: CallRecord, template: str, raw: str) -> tuple[JsonValue, str]:
        if record.schema_ is None:
            return raw.strip(), "" if raw.strip() else "the reply is empty"
        try:
            value = extract_json(raw)
        except PlanFormatError as error:
            return None, error.problem
        if record.purpose == "plan":
            return value, _check_plan(
                value, self.tools, self.max_steps, batch=template == "next_step"
            )
        return value, "" if isinstance(value, dict) else "the reply must be a JSON object"

    async def replay(self, index: int, record: CallRecord, final: CallRecord) -> ReplayedCall:
        messages, template = _new_messages(record, self.templates, self.agent_dir)
        self.elapsed = 0.0
        completion, raw, error = await self.ask(record, messages)
        value, problem = self.judge(record, template, raw) if not error else (None, "")
        repaired = False
        if problem and record.purpose == "plan":
            repair_text = (
                self.templates.get("repair") or load_prompt("repair", self.agent_dir).template
            )
            repair = Template(repair_text).safe_substitute(problem=problem).strip()
            more = [
                *messages,
                ChatMessage(role="assistant", content=raw[:_REPAIR_REPLY_CHARS]),
                ChatMessage(role="user", content=repair),
            ]
            completion, raw, error = await self.ask(record, more)
            value, problem = self.judge(record, template, raw) if not error else (None, "")
            repaired = True
        usage = completion.usage if completion is not None else None
        return ReplayedCall(
            index=index,
            purpose=record.purpose,
            template=template,
            messages=tuple(messages),
            old_raw=final.raw,
            old_parsed=final.parsed,
            new_raw=raw,
            new_parsed=value,
            problem=problem,
            error=error,
            repaired=repaired,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            latency_ms=round(self.elapsed * 1000, 3),
        )


async def replay_turn(
    records: Sequence[CallRecord],
    model: ChatModel,
    *,
    templates: Mapping[str, str] | None = None,
    agent_dir: Path | None = None,
    purposes: Collection[str] = REPLAYED_PURPOSES,
    tools: ToolRegistry | None = None,
    max_steps: int = 8,
    timeouts: Mapping[str, float] = STAGE_TIMEOUTS,
) -> list[ReplayedCall]:
    """Replay the recorded calls of one turn with *model*, one replay per call of *purposes*
    (repair calls excepted), in call order.

    *templates* maps a prompt name to edited template text (checked first: a bad one raises
    :class:`PromptTemplateError` before any model call); other prompts are rendered with the
    template that reproduced the recording. *tools* (the agent's registry) lets a new plan be
    fully validated; without it a plan only has to be a JSON object. Model failures are
    recorded in the result, never raised.
    """
    edited = dict(templates or {})
    for name, text in edited.items():
        check_template(name, text)
    unknown = sorted(set(purposes) - set(REPLAYED_PURPOSES))
    if unknown:
        raise UsageError(f"cannot replay purposes {unknown}; known: {list(REPLAYED_PURPOSES)}")
    replayer = _Replayer(model, edited, agent_dir, tools, max_steps, timeouts)
    replayed: list[ReplayedCall] = []
    for index, record in enumerate(records):
        if record.purpose not in purposes or _is_repair(record):
            continue
        final = record
        for later in records[index + 1 :]:
            if later.purpose != record.purpose or not _is_repair(later):
                break
            final = later
        replayed.append(await replayer.replay(index, record, final))
    return replayed
