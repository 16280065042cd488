"""Tools an agent may call: typed argument schemas, flags, validation and bounded results.

Invariants:

* A tool's arguments are a pydantic model with ``extra="forbid"``; :meth:`ToolRegistry.run`
  validates them *before* the handler is called, so a handler never sees an unknown key or a
  wrongly typed value (prompt-injected calls included).
* Every tool declares ``side_effect`` (it changes state: the planner must get the user's
  confirmation first) and ``live_state`` (a read whose answer can change outside the chat: the
  planner re-runs it rather than trusting remembered results).
* A :class:`ToolResult` never holds a secret: its output is passed through
  :func:`~agentkit.calls.secrets.mask_secrets` and its text is bounded (``max_output_chars``,
  default 4000, with a visible marker when cut).
* A handler may be synchronous or return an awaitable (an ``async def`` tool, an MCP call):
  :meth:`ToolRegistry.arun` awaits it on the caller's loop, :meth:`ToolRegistry.run` drives it
  to completion for synchronous callers. Both give the same results and the same errors.
* A tool defined by a JSON schema rather than a pydantic model (an MCP server's tool) has a
  :class:`SchemaArgs` subclass as its ``args_model``: its arguments are checked against that
  schema with ``jsonschema``, and keys the schema does not name are refused unless it allows
  them explicitly (``additionalProperties``).

Errors::

    AgentkitError
    ├── UsageError
    │   ├── ToolDefinitionError    a tool was defined or registered wrongly (a programming error)
    │   ├── UnknownToolError       a tool name the registry does not hold (lists the known ones)
    │   └── ToolArgumentsError     arguments that do not match the tool's schema (names the field)
    ├── ToolFailedError            raised by a handler for a domain problem → ToolResult(ok=False)
    └── ToolCrashedError           a handler raised anything else (a bug); the cause is chained
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError
from pydantic_core import to_jsonable_python

from agentkit.calls.secrets import SecretMask, is_secret_key, mask_secrets, scrub_text
from agentkit.errors import AgentkitError, UsageError

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "SchemaArgs",
    "Tool",
    "ToolArgumentsError",
    "ToolCrashedError",
    "ToolDefinitionError",
    "ToolFailedError",
    "ToolRegistry",
    "ToolResult",
    "UnknownToolError",
]

DEFAULT_MAX_OUTPUT_CHARS = 4000
_MIN_OUTPUT_CHARS = 64
_TOOL_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
#: names a schema-defined (MCP) tool may keep: what function-calling APIs accept
_SCHEMA_TOOL_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}", re.ASCII)

ArgsT = TypeVar("ArgsT", bound=BaseModel)
T = TypeVar("T")


class ToolDefinitionError(UsageError, ValueError):
    """A tool definition is invalid (bad name, args model without ``extra="forbid"``, duplicate)."""


class UnknownToolError(UsageError, LookupError):
    """``names`` are not tools of this registry; ``known`` lists the ones it holds."""

    def __init__(self, names: Sequence[str], known: Sequence[str]) -> None:
        self.names = tuple(names)
        self.known = tuple(known)
        listed = ", ".join(repr(name) for name in self.names)
        plural = "s" if len(self.names) > 1 else ""
        super().__init__(
            f"unknown tool{plural} {listed}; known tools: {', '.join(self.known) or '(none)'}"
        )


class ToolArgumentsError(UsageError, ValueError):
    """Arguments for ``tool`` do not match its schema. ``field`` is the first bad field
    (dotted path, ``""`` for the arguments as a whole); ``problems`` holds every
    ``(field, problem)`` pair. Messages never quote the offending values."""

    def __init__(self, tool: str, problems: Sequence[tuple[str, str]]) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        self.field = self.problems[0][0] if self.problems else ""
        described = "; ".join(
            f"{name!r}: {problem}" if name else problem for name, problem in self.problems
        )
        super().__init__(f"invalid arguments for tool {tool!r}: {described}")


class ToolFailedError(AgentkitError):
    """Raised by a handler when the request cannot be done (a missing reference, a duplicate
    name). :meth:`ToolRegistry.run` turns it into ``ToolResult(ok=False, error=message)``."""


class ToolCrashedError(AgentkitError):
    """A handler raised something other than :class:`ToolFailedError`: a bug, not a domain
    answer. The original exception is the ``__cause__``."""

    def __init__(self, tool: str, problem: str) -> None:
        self.tool = tool
        super().__init__(f"tool {tool!r} crashed: {problem}")


class ToolResult(BaseModel):
    """What one tool call produced, safe to show: secrets masked, ``text`` bounded.

    ``output`` is the full (masked) JSON value; ``text`` is its JSON text cut to the
    registry's bound, which is what observations and prompts should carry. A failed call
    (``ok=False``) has ``output=None``, ``error`` set and ``text`` = ``{"error": …}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["tool_result"] = "tool_result"
    tool: str
    ok: bool
    output: JsonValue = None
    text: str = ""
    error: str | None = None
    truncated: bool = False


class SchemaArgs(BaseModel):
    """Arguments of a tool defined by a JSON schema (an MCP server's ``inputSchema``).

    Subclasses are made by :func:`schema_args_model`; the arguments are checked against
    :attr:`input_schema` by :meth:`ToolRegistry.validate` and kept as given
    (:meth:`arguments`).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    def arguments(self) -> dict[str, JsonValue]:
        """The validated arguments, as the JSON object they arrived as."""
        return dict(self.__pydantic_extra__ or {})

    @classmethod
    def problems(cls, raw_args: Mapping[str, object]) -> list[tuple[str, str]]:
        """``(field, problem)`` for each way *raw_args* break the schema (none: valid).
        Problems never quote the offending values."""
        import jsonschema

        schema = _closed(cls.input_schema)
        instance: Any = dict(raw_args)
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator = validator_class(schema)
            errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
        except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType) as error:
            problem = error.message if isinstance(error, jsonschema.SchemaError) else str(error)
            return [("", f"the tool's own schema is invalid: {problem}")]
        return [_schema_problem(error, raw_args) for error in errors]


def schema_args_model(tool_name: str, input_schema: Mapping[str, Any]) -> type[SchemaArgs]:
    """A :class:`SchemaArgs` subclass checking arguments against *input_schema*."""
    schema = copy.deepcopy(dict(input_schema))
    schema.setdefault("type", "object")
    name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", tool_name)) + "Args"
    return type(name, (SchemaArgs,), {"input_schema": schema, "__module__": __name__})


def _closed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """*schema* refusing keys it does not name, unless it says otherwise."""
    closed = dict(schema)
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


def _schema_problem(error: Any, raw_args: Mapping[str, object]) -> tuple[str, str]:  # noqa: ANN401 - a jsonschema ValidationError
    where = ".".join(str(part) for part in error.path)
    kind = error.validator
    if kind == "additionalProperties":
        named = set(error.schema.get("properties", {}))
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        extra = sorted(str(key) for key in instance if key not in named)
        return (".".join(filter(None, [where, extra[0] if extra else ""])), "unexpected argument")
    if kind == "required":
        instance = error.instance if isinstance(error.instance, Mapping) else raw_args
        missing = [str(key) for key in error.validator_value if key not in instance]
        field = ".".join(filter(None, [where, missing[0] if missing else ""]))
        return (field, "missing required argument")
    if kind in ("type", "enum", "const", "format", "pattern"):
        expected = json.dumps(error.validator_value, ensure_ascii=False)
        return (where, f"must match {kind} {expected}")
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return (where, f"violates {kind} {error.validator_value}")
    if kind in ("minLength", "maxLength", "minItems", "maxItems"):
        return (where, f"violates {kind} {error.validator_value}")
    return (where, f"does not match the schema ({kind})")


@functools.lru_cache(maxsize=1024)
def _model_schema_text(model: type[BaseModel]) -> str:
    """pydantic's JSON schema of *model*, built once (a build costs ~1 ms; a turn asks often)."""
    return json.dumps(model.model_json_schema())


@functools.lru_cache(maxsize=1024)
def _compact_schema_text(model: type[BaseModel]) -> str:
    """:meth:`Tool.json_schema` of a tool whose arguments are *model*, built once per model
    (an agent opened per run rebuilds its tools, but their argument models are the same)."""
    if issubclass(model, SchemaArgs):
        schema: dict[str, Any] = copy.deepcopy(model.input_schema)
    else:
        schema = json.loads(_model_schema_text(model))
    defs = schema.pop("$defs", {})
    return json.dumps(_compact(schema, defs if isinstance(defs, dict) else {}))


@dataclass(frozen=True, kw_only=True)
class Tool(Generic[ArgsT]):
    """One tool: a ``name``, a ``description`` for the planner, an ``args_model`` (pydantic,
    ``extra="forbid"``, or a :class:`SchemaArgs` subclass), the two flags, and a ``handler``
    that receives the validated arguments and returns a JSON-able value (a pydantic model is
    fine) or an awaitable of one.

    ``examples`` are requests the tool serves, in the user's words (for routing);
    ``consent`` says what a call does, in the tool's own words, for the question asked before
    a side-effecting call (``""``: the description says it);
    ``source`` names the toolset it came from (``""`` for a tool given directly).
    Python tools have snake_case names; a schema-defined tool keeps its server's name
    (letters, digits, ``_`` and ``-``).
    """

    name: str
    description: str
    args_model: type[ArgsT]
    handler: Callable[[ArgsT], object]
    side_effect: bool
    live_state: bool
    examples: tuple[str, ...] = ()
    source: str = ""
    consent: str = ""

    def __post_init__(self) -> None:
        schema_defined = issubclass(self.args_model, SchemaArgs)
        pattern = _SCHEMA_TOOL_NAME_RE if schema_defined else _TOOL_NAME_RE
        if not pattern.fullmatch(self.name):
            rule = "[A-Za-z][A-Za-z0-9_-]{0,63}" if schema_defined else "[a-z][a-z0-9_]{0,63}"
            kind = "a valid tool name" if schema_defined else "snake_case"
            raise ToolDefinitionError(f"tool name {self.name!r} is not {kind} ({rule})")
        if not schema_defined and self.args_model.model_config.get("extra") != "forbid":
            raise ToolDefinitionError(
                f"tool {self.name!r}: {self.args_model.__name__} must set extra='forbid'"
            )
        if self.side_effect and self.live_state:
            raise ToolDefinitionError(
                f"tool {self.name!r}: live_state marks a read; a side-effecting tool is not one"
            )

    def raw_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema as defined (pydantic's, or the server's)."""
        if issubclass(self.args_model, SchemaArgs):
            return copy.deepcopy(self.args_model.input_schema)
        schema: dict[str, Any] = json.loads(_model_schema_text(self.args_model))
        return schema

    def json_schema(self) -> dict[str, JsonValue]:
        """The arguments' JSON schema, compact: titles dropped, local ``$ref`` inlined."""
        compact: dict[str, JsonValue] = json.loads(_compact_schema_text(self.args_model))
        return compact

    def flags(self) -> tuple[str, ...]:
        """``("side_effect",)``, ``("read", "live_state")`` or ``("read",)``."""
        if self.side_effect:
            return ("side_effect",)
        return ("read", "live_state") if self.live_state else ("read",)

    def with_flags(
        self, *, side_effect: bool | None = None, live_state: bool | None = None
    ) -> Tool[ArgsT]:
        """This tool with its flags overridden (an agent's config may do that per tool)."""
        side = self.side_effect if side_effect is None else side_effect
        live = self.live_state if live_state is None else live_state
        if side_effect and live_state is None:
            live = False
        if live_state and side_effect is None:
            side = False
        return replace(self, side_effect=side, live_state=live)


def _entry(tool: Tool[Any]) -> str:
    """One tool's entry in a prompt's tool listing (see :meth:`ToolRegistry.render`)."""
    return _render_entry(
        tool.name, tool.flags(), tool.description, cast("type[BaseModel]", tool.args_model)
    )


@functools.lru_cache(maxsize=4096)
def _render_entry(
    name: str, flags: tuple[str, ...], description: str, args_model: type[BaseModel]
) -> str:
    """An entry, built once per tool as it reads (an agent opened per run rebuilds its
    tools: equal tools share the entry)."""
    schema: dict[str, JsonValue] = json.loads(_compact_schema_text(args_model))
    shown = {key: schema[key] for key in ("properties", "required") if schema.get(key)}
    args = json.dumps(shown, separators=(",", ":"), ensure_ascii=False) if shown else "{}"
    return f"- {name} [{', '.join(flags)}]: {description}\n  args: {args}"


class ToolRegistry:
    """An ordered set of tools, with validation, bounded execution and prompt rendering.

    ``secrets`` (optional) returns the secret values the tools' domain stores; they are
    scrubbed from every result and error text in addition to masking secret-named keys.
    ``secret_patterns`` are the formats of the domain's secrets (regular expressions its
    toolsets declare): what they match is masked wherever a turn writes or shows text
    (:attr:`mask`), a key the user types included.
    """

    def __init__(
        self,
        tools: Iterable[Tool[Any]] = (),
        *,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        secrets: Callable[[], Iterable[str]] | None = None,
        secret_patterns: Iterable[str] = (),
    ) -> None:
        if max_output_chars < _MIN_OUTPUT_CHARS:
            raise ToolDefinitionError(f"max_output_chars must be at least {_MIN_OUTPUT_CHARS}")
        self.max_output_chars = max_output_chars
        self.secrets = secrets
        try:
            patterns = SecretMask.compile(secret_patterns)
        except ValueError as error:
            raise ToolDefinitionError(str(error)) from None
        #: masks what the turn writes or shows (see the class docstring)
        self.mask = SecretMask(self.current_secrets if secrets is not None else None, patterns)
        #: tool calls started so far: a tool may store a new secret, so a list of the
        #: domain's secrets is current only while this count is unchanged
        self.runs = 0
        #: the domain's secrets as last read, and the run count they were read at
        self._read_at: tuple[int, list[str]] | None = None
        self._tools: dict[str, Tool[Any]] = {}
        self._signature: str | None = None
        self._rendered: str | None = None
        for tool in tools:
            self.register(tool)

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"

    def register(self, tool: Tool[Any]) -> None:
        """Add *tool*; a second tool with the same name is a :class:`ToolDefinitionError`."""
        if tool.name in self._tools:
            raise ToolDefinitionError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._signature = self._rendered = None

    def get(self, name: str) -> Tool[Any]:
        """The tool called *name*, or :class:`UnknownToolError` listing the known tools."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError([name], self.names()) from None

    def names(self) -> tuple[str, ...]:
        """Tool names, in registration order."""
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def subset(self, allow_list: Iterable[str]) -> ToolRegistry:
        """A registry holding only the allow-listed tools (an agent's config ``tools``), in
        allow-list order; any name this registry does not hold is an :class:`UnknownToolError`."""
        wanted = list(dict.fromkeys(allow_list))
        unknown = [name for name in wanted if name not in self._tools]
        if unknown:
            raise UnknownToolError(unknown, self.names())
        return ToolRegistry(
            [self._tools[name] for name in wanted],
            max_output_chars=self.max_output_chars,
            secrets=self.secrets,
            secret_patterns=[pattern.pattern for pattern in self.mask.patterns],
        )

    def live_state_tools(self) -> tuple[Tool[Any], ...]:
        """The reads whose answers can change outside the chat (the planner's snapshot tools)."""
        return tuple(tool for tool in self._tools.values() if tool.live_state)

    def render(self) -> str:
        """A compact text block for planner prompts: one entry per tool with its flags,
        description and argument ``properties``/``required`` (extra arguments are always
        rejected, so ``additionalProperties`` is not repeated). Built once per registry."""
        if self._rendered is None:
            self._rendered = "\n".join(self.entries())
        return self._rendered

    def entries(self) -> list[str]:
        """Each tool's entry of :meth:`render`, in order (built once per tool)."""
        return [_entry(tool) for tool in self._tools.values()]

    def schema_signature(self) -> str:
        """A stable hash over tool names, flags and argument schemas (not descriptions):
        the capability signature the planner stores with its execution state."""
        if self._signature is not None:
            return self._signature
        payload = [
            [tool.name, tool.side_effect, tool.live_state, tool.raw_schema()]
            for tool in sorted(self._tools.values(), key=lambda tool: tool.name)
        ]
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        self._signature = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
        return self._signature

    def validate(self, name: str, raw_args: Mapping[str, object]) -> BaseModel:
        """The validated arguments for tool *name*. Never runs the tool.

        Raises :class:`UnknownToolError` or :class:`ToolArgumentsError`.
        """
        tool = self.get(name)
        if not isinstance(raw_args, Mapping):
            raise ToolArgumentsError(name, [("", "arguments must be a JSON object")])
        if issubclass(tool.args_model, SchemaArgs):
            problems = tool.args_model.problems(raw_args)
            if problems:
                raise ToolArgumentsError(name, problems)
        try:
            args: BaseModel = tool.args_model.model_validate(dict(raw_args))
        except ValidationError as error:
            raise ToolArgumentsError(name, _problems(error)) from None
        return args

    def run(self, name: str, raw_args: Mapping[str, object]) -> ToolResult:
        """Validate, then call tool *name* (an awaitable result is driven to completion).

        Caller mistakes raise (:class:`UnknownToolError`, :class:`ToolArgumentsError`); a
        :class:`ToolFailedError` from the handler becomes ``ok=False`` with its message; any
        other handler exception raises :class:`ToolCrashedError`.
        """
        args = self.validate(name, raw_args)
        known = self._started(raw_args)
        try:
            output = self._tools[name].handler(args)
            if inspect.isawaitable(output):
                output = _wait(output)
        except ToolFailedError as failure:
            return self._failed(name, failure, known)
        except Exception as error:
            raise self._crashed(name, error, known) from error
        return self._succeeded(name, output, known)

    async def arun(self, name: str, raw_args: Mapping[str, object]) -> ToolResult:
        """:meth:`run` for async callers: an awaitable result is awaited on this loop."""
        args = self.validate(name, raw_args)
        known = self._started(raw_args)
        try:
            output = self._tools[name].handler(args)
            if inspect.isawaitable(output):
                output = await output
        except ToolFailedError as failure:
            return self._failed(name, failure, known)
        except Exception as error:
            raise self._crashed(name, error, known) from error
        return self._succeeded(name, output, known)

    def _succeeded(self, name: str, output: object, known: list[str]) -> ToolResult:
        try:
            value = to_jsonable_python(output)
        except Exception as error:  # a value JSON cannot carry is the handler's bug
            raise self._crashed(name, error, known) from error
        masked = mask_secrets(value, known)
        text, truncated = _bounded(json.dumps(masked, ensure_ascii=False), self.max_output_chars)
        return ToolResult(tool=name, ok=True, output=masked, text=text, truncated=truncated)

    def _failed(self, name: str, failure: ToolFailedError, known: list[str]) -> ToolResult:
        message = scrub_text(str(failure), known)
        text, truncated = _bounded(
            json.dumps({"error": message}, ensure_ascii=False), self.max_output_chars
        )
        return ToolResult(tool=name, ok=False, error=message, text=text, truncated=truncated)

    def _crashed(self, name: str, error: Exception, known: list[str]) -> ToolCrashedError:
        return ToolCrashedError(name, scrub_text(f"{type(error).__name__}: {error}", known))

    def _started(self, raw_args: Mapping[str, object]) -> list[str]:
        """A run starts: the secret values to scrub from it (the call's own secret arguments
        and the domain's, read now)."""
        known = [
            value
            for key, value in raw_args.items()
            if isinstance(value, str) and is_secret_key(str(key))
        ]
        domain = list(self.secrets()) if self.secrets is not None else []
        self.runs += 1
        return known + domain

    def current_secrets(self) -> list[str]:
        """The domain's secret values now: read once after each tool run (any tool may store
        one, whatever it declares), else the last read's."""
        if self.secrets is None:
            return []
        last = self._read_at
        if last is not None and last[0] == self.runs:
            return last[1]
        values = list(self.secrets())
        self._read_at = (self.runs, values)
        return values


def _wait(awaitable: Awaitable[T]) -> T:
    """The result of *awaitable*, for a synchronous caller: on a fresh loop in this thread,
    or on a helper thread when this thread already runs a loop (Jupyter, a server)."""

    async def main() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentkit-tool") as pool:
        return pool.submit(asyncio.run, main()).result()


def _bounded(text: str, limit: int) -> tuple[str, bool]:
    """*text* cut to at most *limit* characters, the cut marked, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    marker = f"…[truncated {len(text)} chars to {limit}]"
    return text[: limit - len(marker)] + marker, True


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        kind = item["type"]
        if kind == "extra_forbidden":
            problem = "unexpected argument"
        elif kind == "missing":
            problem = "missing required argument"
        else:
            problem = item["msg"]
        problems.append((where, problem))
    return problems


def _compact(node: JsonValue, defs: Mapping[str, JsonValue], depth: int = 0) -> JsonValue:
    """Drop ``title`` keywords and inline ``#/$defs/…`` references (keeps property names).
    A recursive model's references are kept as they are below a fixed depth."""
    if isinstance(node, list):
        return [_compact(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
        target = defs.get(ref.removeprefix("#/$defs/"), {})
        rest = {key: value for key, value in node.items() if key != "$ref"}
        merged = {**(target if isinstance(target, dict) else {}), **rest}
        return _compact(merged, defs, depth + 1)
    compact: dict[str, JsonValue] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties" and isinstance(value, dict):
            compact[key] = {name: _compact(prop, defs, depth) for name, prop in value.items()}
        else:
            compact[key] = _compact(value, defs, depth)
    return compact
