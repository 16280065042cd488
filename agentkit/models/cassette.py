"""Record and replay model calls: the ``record:FILE:SPEC`` and ``replay:FILE`` specs.

:class:`RecordingModel` wraps any :class:`~agentkit.models.base.ChatModel` and appends every
call to FILE as one JSON line (a *cassette*)::

    {"v": 1, "model": "openai:gpt-4o", "native_tools": true,
     "request": {"call": "stream" | "complete" | "tools", "purpose": …, "messages": […],
                 "schema": … | null, "tools": […] | null},
     "reply": {"events": [{"type": "text", "text": …}, …], "text": …, "structured": …,
               "tool_calls": […], "usage": {…}, "stop_reason": …}
              | {"error": {"kind": "model" | "structured", "backend": …, "message": …, "raw": …}}}

Secret-named keys (``api_key``, ``secretKey``, …) are masked wherever they occur as JSON keys:
in tool arguments, structured replies, JSON reply text and schemas
(:func:`agentkit.calls.secrets.mask_secrets`). Free text is kept as sent: agentkit masks
secrets before they reach a prompt, so a prompt holds none unless a user typed one.

:class:`ReplayModel` answers each call from a cassette by matching its request — the canonical
JSON of the (masked) request, every field (a streamed and a whole reply answer each other) —
taking the recorded calls in file order when identical requests repeat. A request with no
match is a :class:`~agentkit.errors.ModelError` naming the first difference against the
nearest recorded request; there is no fallback. A replay reports the recorded model's spec,
so a replayed run's events and tables are the recorded run's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from agentkit.calls.secrets import mask_secrets
from agentkit.errors import ModelError, ModelSpecError, StructuredOutputError
from agentkit.models.base import (
    ChatModel,
    Completion,
    ModelEvent,
    ModelRequest,
    PermissionRequest,
    Purpose,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
    WrapperModel,
)
from agentkit.types import Usage

__all__ = ["CassetteEntry", "CassetteRequest", "RecordingModel", "ReplayModel"]

CallKind = Literal["stream", "complete", "tools"]


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CassetteRequest(_Value):
    """What a model was asked: the call, its purpose, messages, schema and offered tools."""

    call: CallKind
    purpose: Purpose
    messages: list[dict[str, str]]
    schema_: JsonValue = None
    tools: list[dict[str, JsonValue]] | None = None

    def canonical(self) -> str:
        """The JSON a replay matches on: sorted keys, no spaces; ``stream`` and ``complete``
        match each other (whether the caller read the deltas changes no reply)."""
        data = self.as_json()
        data["call"] = "tools" if self.call == "tools" else "text"
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    def as_json(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = self.model_dump(mode="json")
        data["schema"] = data.pop("schema_")
        return data


class CassetteError(_Value):
    kind: Literal["model", "structured"]
    backend: str
    message: str
    raw: str = ""


class CassetteReply(_Value):
    """What the model answered: the streamed events (for ``stream``) and the completion."""

    events: list[dict[str, JsonValue]] = []
    text: str = ""
    structured: JsonValue = None
    tool_calls: list[dict[str, JsonValue]] = []
    usage: dict[str, int] = {}
    stop_reason: str = "stop"
    error: CassetteError | None = None


class CassetteEntry(_Value):
    """One line of a cassette file."""

    v: Literal[1] = 1
    model: str = ""
    native_tools: bool = False
    request: dict[str, JsonValue]
    reply: CassetteReply


def _masked(value: Any) -> Any:  # noqa: ANN401 - JSON in, JSON out
    return mask_secrets(json.loads(json.dumps(value, ensure_ascii=False, default=str)))


def _masked_text(text: str) -> str:
    """*text*, with secret-named keys masked when it is a JSON object or array."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        value = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        return text
    masked = mask_secrets(value)
    return text if masked == value else json.dumps(masked, ensure_ascii=False)


def make_request(request: ModelRequest) -> CassetteRequest:
    """The masked request of one call, as recorded and as matched."""
    call: CallKind = "tools" if request.tools else "stream" if request.stream else "complete"
    return CassetteRequest(
        call=call,
        purpose=request.purpose,
        messages=[{"role": m.role, "content": m.content} for m in request.messages],
        schema_=_masked(request.json_schema),
        tools=[_masked(tool.model_dump()) for tool in request.tools] if request.tools else None,
    )


def _event_json(event: ModelEvent) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = _masked(event.model_dump(mode="json"))
    if isinstance(event, TextDelta | ThinkingDelta):
        data["text"] = event.text  # streamed pieces are kept as they came (matched as a whole)
    return data


def _reply(completion: Completion, events: list[dict[str, JsonValue]]) -> CassetteReply:
    text = _masked_text(completion.text)
    if text != completion.text and events:  # the streamed pieces must add up to the text
        events = [e for e in events if e.get("type") not in ("text",)]
        events.insert(0, {"type": "text", "text": text})
    return CassetteReply(
        events=events,
        text=text,
        structured=_masked(completion.structured),
        tool_calls=[_masked(call.model_dump(mode="json")) for call in completion.tool_calls],
        usage=completion.usage.model_dump(),
        stop_reason=completion.stop_reason,
    )


def _error_reply(error: ModelError) -> CassetteReply:
    prefix = f"{error.backend}: "
    message = str(error)
    message = message[len(prefix) :] if message.startswith(prefix) else message
    if isinstance(error, StructuredOutputError):
        failure = CassetteError(
            kind="structured", backend=error.backend, message=error.problem, raw=error.raw
        )
    else:
        failure = CassetteError(kind="model", backend=error.backend, message=message)
    return CassetteReply(error=failure)


class RecordingModel(WrapperModel):
    """Runs *inner* and appends every call (request and reply, secrets masked) to *path*."""

    def __init__(self, inner: ChatModel, path: Path) -> None:
        super().__init__(inner)
        self.path = path
        self._lock = threading.Lock()

    def _append(self, request: CassetteRequest, reply: CassetteReply) -> None:
        entry = CassetteEntry(
            model=self.spec,
            native_tools=self.native_tools,
            request=request.as_json(),
            reply=reply,
        )
        line = entry.model_dump_json(exclude_defaults=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as cassette:
            cassette.write(line)  # one write per line: parallel recorders do not interleave

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        recorded = make_request(request)
        events: list[dict[str, JsonValue]] = []
        try:
            async for event in self.inner.request(request):
                if isinstance(event, Completion):
                    self._append(recorded, _reply(event, events))
                else:
                    events.append(_event_json(event))
                yield event
        except ModelError as error:
            self._append(recorded, _error_reply(error))
            raise


Difference = tuple[str, str]


def _first_difference(recorded: JsonValue, asked: JsonValue, path: str) -> Difference | None:
    """Where *asked* first departs from *recorded*, and how (None when they are equal)."""
    if isinstance(recorded, dict) and isinstance(asked, dict):
        return _dict_difference(recorded, asked, path)
    if isinstance(recorded, list) and isinstance(asked, list):
        for index, (old, new) in enumerate(zip(recorded, asked, strict=False)):
            found = _first_difference(old, new, f"{path}[{index}]")
            if found:
                return found
        if len(recorded) != len(asked):
            return path, f"{len(asked)} items now, {len(recorded)} recorded"
        return None
    if recorded == asked:
        return None
    return path, _leaf_difference(recorded, asked)


def _dict_difference(
    recorded: dict[str, JsonValue], asked: dict[str, JsonValue], path: str
) -> Difference | None:
    for key in [*recorded, *(k for k in asked if k not in recorded)]:
        where = f"{path}.{key}" if path else key
        if key not in asked:
            return where, "missing now (it was recorded)"
        if key not in recorded:
            return where, "not in the recorded request"
        found = _first_difference(recorded[key], asked[key], where)
        if found:
            return found
    return None


def _leaf_difference(recorded: JsonValue, asked: JsonValue) -> str:
    if isinstance(recorded, str) and isinstance(asked, str):
        at = next(
            (i for i, (a, b) in enumerate(zip(recorded, asked, strict=False)) if a != b),
            min(len(recorded), len(asked)),
        )
        start = max(0, at - 30)
        return (
            f"differs at character {at}: recorded {recorded[start : at + 40]!r}, "
            f"now {asked[start : at + 40]!r}"
        )
    return f"recorded {json.dumps(recorded)[:80]}, now {json.dumps(asked)[:80]}"


def _distance(recorded: JsonValue, asked: JsonValue) -> int:
    """A rough count of differing leaves (how near a recorded request is)."""
    if isinstance(recorded, dict) and isinstance(asked, dict):
        keys = set(recorded) | set(asked)
        return sum(_distance(recorded.get(k), asked.get(k)) for k in keys)
    if isinstance(recorded, list) and isinstance(asked, list):
        shared = sum(_distance(a, b) for a, b in zip(recorded, asked, strict=False))
        return shared + abs(len(recorded) - len(asked))
    return 0 if recorded == asked else 1


class ReplayModel(ChatModel):
    """Answers every call from a cassette file; an unmatched request is a ModelError."""

    def __init__(self, entries: Sequence[CassetteEntry], *, name: str = "inline") -> None:
        self.name = name
        self.entries = list(entries)
        self._used = [False] * len(self.entries)
        self._keys = [_request_of(entry).canonical() for entry in self.entries]
        self._lock = threading.Lock()
        self.spec = next((e.model for e in self.entries if e.model), f"replay:{name}")
        self.native_tools = any(e.native_tools for e in self.entries)

    @classmethod
    def from_file(cls, path: Path) -> ReplayModel:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise ModelSpecError(f"replay:{path}", f"cannot read the cassette: {error}") from None
        entries: list[CassetteEntry] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entries.append(CassetteEntry.model_validate_json(line))
            except ValidationError as error:
                problem = error.errors()[0]["msg"]
                raise ModelSpecError(
                    f"replay:{path}", f"line {number} is not a recorded call: {problem}"
                ) from None
        return cls(entries, name=str(path))

    @property
    def remaining(self) -> int:
        """Recorded calls not answered yet."""
        return self._used.count(False)

    def _answer(self, request: CassetteRequest) -> CassetteReply:
        key = request.canonical()
        with self._lock:
            for index, recorded in enumerate(self._keys):
                if recorded == key and not self._used[index]:
                    self._used[index] = True
                    return self.entries[index].reply
            if key in self._keys:
                count = self._keys.count(key)
                raise ModelError(
                    f"replay:{self.name}",
                    f"this {request.purpose} request was recorded {count} time(s) and every "
                    "recorded reply is used up",
                )
        raise ModelError(f"replay:{self.name}", self._mismatch(request))

    def _mismatch(self, request: CassetteRequest) -> str:
        if not self.entries:
            return "the cassette is empty"
        asked = request.as_json()
        candidates = [_request_of(entry).as_json() for entry in self.entries]
        same_call = [
            c for c in candidates if c["purpose"] == asked["purpose"] and c["call"] == asked["call"]
        ]
        pool = same_call or candidates
        nearest = min(pool, key=lambda c: _distance(c, asked))
        found = _first_difference(nearest, asked, "")
        where, how = found if found else ("(request)", "no difference found")
        return (
            f"no recorded call matches this {request.purpose} request "
            f"({len(self.entries)} recorded); nearest differs at {where}: {how}"
        )

    @staticmethod
    def _raise(reply: CassetteReply) -> None:
        failure = reply.error
        if failure is None:
            return
        if failure.kind == "structured":
            raise StructuredOutputError(failure.backend, failure.message, failure.raw)
        raise ModelError(failure.backend, failure.message)

    @staticmethod
    def _completion(reply: CassetteReply) -> Completion:
        return Completion(
            text=reply.text,
            usage=Usage.model_validate(reply.usage),
            stop_reason=reply.stop_reason,
            structured=reply.structured,
            tool_calls=tuple(ToolCallRequest.model_validate(c) for c in reply.tool_calls),
        )

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        reply = self._answer(make_request(request))
        self._raise(reply)
        for event in reply.events:
            yield _event_of(event)
        yield self._completion(reply)


def _request_of(entry: CassetteEntry) -> CassetteRequest:
    data = dict(entry.request)
    data["schema_"] = data.pop("schema", None)
    return CassetteRequest.model_validate(data)


def _event_of(data: dict[str, JsonValue]) -> ModelEvent:
    kind = data.get("type")
    if kind == "text":
        return TextDelta.model_validate(data)
    if kind == "thinking":
        return ThinkingDelta.model_validate(data)
    if kind == "tool_call":
        return ToolCallRequest.model_validate(data)
    if kind == "permission":
        return PermissionRequest.model_validate(data)
    raise ModelError("replay", f"a recorded event of unknown type {kind!r}")
