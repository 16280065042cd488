"""The scripted model: deterministic replies, for tests, notebooks and the README.

A script is JSON: either a list (replies in call order, whatever the purpose) or an object
mapping a purpose to its list of replies. A string reply is returned verbatim; an object or an
array is returned as its JSON text. A purpose whose list runs out repeats its last reply; a
purpose with no entry, or an exhausted plain list, is a clear :class:`ModelError`.

With native function calling (a request offering ``tools``, the planner's ``tool_loop``), a
reply ``{"tool_calls": [{"name": …, "arguments": {…}}, …]}`` is a request
to call those tools; any other reply is the final text.

Every request is recorded in :attr:`ScriptedModel.requests`, and appended as one JSON line
``{purpose, messages, schema}`` to the file named by ``$AGENTKIT_SCRIPTED_LOG`` when it is set,
so a test can see exactly what a model was sent, even from another process.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import JsonValue, TypeAdapter, ValidationError

from agentkit.errors import ModelError, ModelSpecError
from agentkit.models.base import (
    PURPOSES,
    ChatModel,
    Completion,
    ModelEvent,
    Purpose,
    TextDelta,
)
from agentkit.models.request import ModelRequest, estimate_tokens, tool_calls_of
from agentkit.types import Usage

__all__ = ["ScriptedModel", "ScriptedRequest"]

Script = list[JsonValue] | dict[str, list[JsonValue]]
_SCRIPT_ADAPTER: TypeAdapter[Script] = TypeAdapter(Script)


#: what :attr:`ScriptedModel.requests` holds (the same record as a function model's)
ScriptedRequest = ModelRequest


def _reply_text(reply: JsonValue) -> str:
    return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)


class ScriptedModel(ChatModel):
    """Replies from a script, in order; records every request it receives."""

    def __init__(
        self,
        script: Script,
        *,
        name: str = "inline",
        log_path: Path | None = None,
    ) -> None:
        try:
            self._script: Script = _SCRIPT_ADAPTER.validate_python(script)
        except ValidationError as error:
            raise ModelSpecError(
                f"scripted:{name}", f"not a script: {error.errors()[0]['msg']}"
            ) from None
        if isinstance(self._script, dict):
            unknown = sorted(set(self._script) - set(PURPOSES))
            if unknown:
                raise ModelSpecError(f"scripted:{name}", f"unknown purposes {unknown}")
        self.spec = f"scripted:{name}"
        self.requests: list[ScriptedRequest] = []
        self._position: dict[str, int] = {}
        env_log = os.environ.get("AGENTKIT_SCRIPTED_LOG")
        self._log_path = log_path or (Path(env_log) if env_log else None)

    @classmethod
    def from_file(cls, path: Path) -> ScriptedModel:
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise ModelSpecError(f"scripted:{path}", f"cannot read the script: {error}") from None
        try:
            script = _SCRIPT_ADAPTER.validate_json(raw)
        except ValidationError as error:
            problem = error.errors()[0]["msg"]
            raise ModelSpecError(
                f"scripted:{path}", f"not a list or purpose map: {problem}"
            ) from None
        return cls(script, name=str(path))

    def _next_reply(self, purpose: Purpose) -> str:
        if isinstance(self._script, list):
            index = self._position.get("", 0)
            if index >= len(self._script):
                raise ModelError(
                    self.spec, f"the script has no reply left (it had {len(self._script)})"
                )
            self._position[""] = index + 1
            return _reply_text(self._script[index])
        replies = self._script.get(purpose)
        if not replies:
            raise ModelError(self.spec, f"the script has no replies for purpose {purpose!r}")
        index = self._position.get(purpose, 0)
        self._position[purpose] = index + 1
        return _reply_text(replies[min(index, len(replies) - 1)])

    def _record(self, request: ScriptedRequest) -> None:
        self.requests.append(request)
        if self._log_path is None:
            return
        line: dict[str, Any] = {
            "purpose": request.purpose,
            "messages": [message.model_dump() for message in request.messages],
            "schema": request.schema,
        }
        with open(self._log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line, ensure_ascii=False) + "\n")

    native_tools = True

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self._record(replace(request, index=len(self.requests)))
        text = self._next_reply(request.purpose)
        usage = Usage(
            input_tokens=sum(estimate_tokens(m.content) for m in request.messages),
            output_tokens=estimate_tokens(text),
        )
        calls = tool_calls_of(text) if request.tools else None
        if calls is not None:
            yield Completion(text="", usage=usage, stop_reason="tool_calls", tool_calls=calls)
            return
        # Stream it in word-sized pieces, as a real model would.
        pieces = text.split(" ")
        for index, piece in enumerate(pieces):
            yield TextDelta(text=piece if index == len(pieces) - 1 else piece + " ")
        yield Completion(text=text, usage=usage)
