"""The function model: a chat model whose replies come from a Python callable.

For tests and experiments whose reply depends on the request — the tools offered, the
purpose, what the user said — where :class:`~agentkit.models.scripted.ScriptedModel`'s fixed
list is not enough. The callable gets one :class:`ModelRequest` and returns:

- ``str`` — the reply's text;
- a JSON-able value (dict, list, number, bool, None) or a pydantic model — its JSON text,
  validated against the schema asked for like any model's reply (so a planner reply that does
  not fit gets the planner's repair round, and :meth:`ChatModel.complete` raises
  :class:`~agentkit.errors.StructuredOutputError`);
- a :class:`ToolCallRequest` (see :func:`tool_call`), a list of them, or
  ``{"tool_calls": [...]}`` — a native tool call, when tools were offered;
- a :class:`Completion` — taken as it is (usage, stop reason, tool calls);
- a generator or async generator of ``str`` chunks (or :class:`TextDelta` /
  :class:`ThinkingDelta`) — a streamed reply; the text is their concatenation.

The callable may be sync or ``async def``. Every request is kept in
:attr:`FunctionModel.requests`, as :class:`ScriptedModel` keeps its own. A callable that
raises :class:`~agentkit.errors.ModelError` is a failed model call; any other exception is
wrapped in one, naming the callable.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from agentkit.errors import ModelError, ModelSpecError
from agentkit.models.base import (
    ChatModel,
    Completion,
    ModelEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.models.request import ModelRequest, estimate_tokens, tool_calls_of
from agentkit.types import Usage

__all__ = ["FunctionModel", "ModelFunction", "call_function", "reply_events", "tool_call"]

#: what a :class:`FunctionModel` calls: ``(request) -> reply``, sync or async
ModelFunction = Callable[[ModelRequest], Any]


def tool_call(name: str, /, call_id: str | None = None, **arguments: Any) -> ToolCallRequest:  # noqa: ANN401
    """A native tool call a model function may return: ``tool_call("get_time", tz="UTC")``."""
    return ToolCallRequest(id=call_id or f"call_{name}", name=name, arguments=arguments)


class FunctionModel(ChatModel):
    """Replies computed by *function* from each :class:`ModelRequest`; records every request.

    *settings* are passed to the function in every request (``request.settings``): the knobs
    an experiment varies (temperature, a variant name, a seed), read-only. With
    ``native_tools=False`` it stands for a backend without function calling; with
    ``wrap_errors=False`` for a backend with a bug (what the function raises is not wrapped).
    """

    native_tools = True

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
        native_tools: bool = True,
        wrap_errors: bool = True,
    ) -> None:
        if not callable(function):
            raise ModelSpecError(f"function:{name or function!r}", "not a callable")
        self.function = function
        self.name = name or getattr(function, "__qualname__", None) or type(function).__name__
        self.spec = f"function:{self.name}"
        self.settings: Mapping[str, Any] = MappingProxyType(dict(settings or {}))
        window = self.settings.get("context_window")
        if window is not None:  # a small window, to test what is fitted to it
            if not isinstance(window, int) or isinstance(window, bool) or window < 64:
                raise ModelSpecError(self.spec, "settings['context_window'] is an int >= 64")
            self.context_window = window
            self.output_reserve = int(self.settings.get("output_reserve", min(256, window // 4)))
        self.requests: list[ModelRequest] = []
        #: False: a backend without function calling (as the embedded model); the planner's
        #: ``tool_loop`` then asks for a JSON action instead of offering tools
        self.native_tools = native_tools
        #: False: an exception the function raises reaches the caller as it is (a backend
        #: with a bug, for testing the turn's boundary), not as a ModelError
        self.wrap_errors = wrap_errors

    @classmethod
    def from_import(cls, target: str) -> FunctionModel:
        """The model of ``package.module:function`` (the ``function:`` model spec)."""
        module_name, _, attribute = target.partition(":")
        if not module_name.strip() or not attribute.strip():
            raise ModelSpecError(
                f"function:{target}", "needs MODULE:FUNCTION, e.g. function:my_tests.models:reply"
            )
        try:
            module = importlib.import_module(module_name.strip())
        except ImportError as error:
            raise ModelSpecError(f"function:{target}", f"cannot import: {error}") from None
        function = module
        for part in attribute.strip().split("."):
            function = getattr(function, part, None)  # type: ignore[assignment]
            if function is None:
                raise ModelSpecError(
                    f"function:{target}", f"module {module_name!r} has no {attribute!r}"
                )
        model = cls(function, name=target.strip())  # type: ignore[arg-type]
        model.spec = f"function:{target.strip()}"
        return model

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.refuse_tools(request)
        request = replace(request, settings=self.settings, index=len(self.requests))
        self.requests.append(request)
        result = await call_function(self.spec, self.function, request, wrap=self.wrap_errors)
        async for event in reply_events(
            self.spec,
            result,
            input_tokens=_size(request),
            tools_offered=bool(request.tools),
            wrap=self.wrap_errors,
        ):
            yield event


async def reply_events(
    spec: str,
    result: Any,  # noqa: ANN401 - whatever the function returned
    *,
    input_tokens: int,
    tools_offered: bool,
    wrap: bool = True,
) -> AsyncIterator[ModelEvent]:
    """A function's reply as model events, ending with one :class:`Completion` (the forms are
    listed in the module docstring); *input_tokens* is the request's estimated size."""
    if isinstance(result, Completion):
        if result.text:
            yield TextDelta(text=result.text)
        yield result
        return
    calls = _as_tool_calls(result)
    if calls is not None:
        if not tools_offered:
            raise ModelError(
                spec, "the model function returned tool calls, but no tools were offered"
            )
        yield Completion(
            text="", usage=_usage(input_tokens, ""), stop_reason="tool_calls", tool_calls=calls
        )
        return
    if inspect.isasyncgen(result) or isinstance(result, Iterator):
        parts: list[str] = []
        async for event in _chunks(spec, result, wrap=wrap):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            yield event
        text = "".join(parts)
    else:
        text = _text_of(spec, result)
        yield TextDelta(text=text)
    parsed = tool_calls_of(text) if tools_offered else None  # the JSON form, as ScriptedModel's
    if parsed is not None:
        usage = _usage(input_tokens, text)
        yield Completion(text="", usage=usage, stop_reason="tool_calls", tool_calls=parsed)
        return
    yield Completion(text=text, usage=_usage(input_tokens, text))


async def call_function(
    spec: str, function: Callable[[Any], Any], request: object, *, wrap: bool = True
) -> Any:  # noqa: ANN401
    """``function(request)``, awaited when it is async; a failure is a :class:`ModelError`."""
    try:
        result = function(request)
        if inspect.isawaitable(result):
            result = await _awaited(result)
    except ModelError:
        raise
    except Exception as error:
        if not wrap:
            raise
        raise ModelError(spec, f"the model function raised {error!r}") from error
    return result


def _size(request: ModelRequest) -> int:
    return sum(estimate_tokens(m.content) for m in request.messages)


async def _awaited(awaitable: Awaitable[Any]) -> Any:  # noqa: ANN401
    return await awaitable


def _usage(input_tokens: int, text: str) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=estimate_tokens(text))


def _as_tool_calls(result: Any) -> tuple[ToolCallRequest, ...] | None:  # noqa: ANN401
    if isinstance(result, ToolCallRequest):
        return (result,)
    if (
        isinstance(result, list | tuple)
        and result
        and all(isinstance(item, ToolCallRequest) for item in result)
    ):
        return tuple(result)
    if isinstance(result, dict) and set(result) == {"tool_calls"}:
        return tool_calls_of(json.dumps(result, default=str))
    return None


def _text_of(spec: str, result: Any) -> str:  # noqa: ANN401
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise ModelError(
            spec, f"the model function returned {type(result).__name__}, not text or JSON: {error}"
        ) from None


async def _chunks(spec: str, stream: Any, *, wrap: bool = True) -> AsyncIterator[ModelEvent]:  # noqa: ANN401
    """The chunks of a generator reply (sync or async) as text and thinking deltas."""

    def event_of(chunk: object) -> ModelEvent:
        if isinstance(chunk, TextDelta | ThinkingDelta):
            return chunk
        if isinstance(chunk, str):
            return TextDelta(text=chunk)
        raise ModelError(spec, f"a streamed chunk must be text, got {type(chunk).__name__}")

    try:
        if inspect.isasyncgen(stream):
            async for chunk in stream:
                yield event_of(chunk)
        else:
            for chunk in stream:
                yield event_of(chunk)
    except ModelError:
        raise
    except Exception as error:
        if not wrap:
            raise
        raise ModelError(spec, f"the model function raised {error!r} while streaming") from error
