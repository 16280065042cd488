"""``@tool``: a typed Python function becomes a tool.

The function's name is the tool's name, its docstring the description, and its parameters'
type hints the argument schema (a pydantic model with ``extra="forbid"``, so everything the
registry guarantees holds: arguments are validated before the function runs). Defaults,
enums, nested pydantic models and ``Annotated`` descriptions carry over::

    @tool
    def add_note(title: Annotated[str, "a short title"], body: str = "") -> Note:
        \"\"\"Save a note.\"\"\"

    @tool(side_effect=True, examples=["delete my note about the dentist"],
          consent="This deletes the note for good.")
    async def delete_note(note_id: int) -> dict[str, bool]: ...

A parameter annotated :class:`ToolContext` is not an argument: it receives the agent's id and
folders when the tool is bound to an agent (where to keep the tool's own data). Descriptions
of parameters may also come from a Google-style ``Args:`` section of the docstring.

The decorated object still calls the function (tests can call it directly); ``.bind()`` makes
the registry's :class:`~agentkit.tools.registry.Tool`.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from agentkit.layout import AgentPaths
from agentkit.tools.registry import Tool, ToolDefinitionError

__all__ = ["ToolContext", "ToolFunction", "as_tool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Example|Examples)\s*:\s*$"
)
_ARG_LINE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the agent's id and folder (``workspace`` is for the tool's data)."""

    agent_id: str
    agent_dir: Path

    @property
    def workspace(self) -> Path:
        """``{agent_dir}/workspace``: the agent's working folder."""
        return AgentPaths(self.agent_dir).workspace


class ToolFunction(Generic[P, R]):
    """A function made a tool by :func:`tool`. Calling it calls the function."""

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        side_effect: bool = False,
        live_state: bool = False,
        examples: Sequence[str] = (),
        consent: str = "",
    ) -> None:
        if not callable(function) or isinstance(function, type):
            raise ToolDefinitionError(f"@tool needs a function, got {function!r}")
        self.function = function
        self.name: str = name or str(getattr(function, "__name__", ""))
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        self.description = (description or summary).strip()
        if not self.description:
            raise ToolDefinitionError(
                f"tool {self.name!r} has no description: give it a docstring or description="
            )
        if isinstance(examples, str):
            raise ToolDefinitionError(f"tool {self.name!r}: examples must be a list of strings")
        self.examples = tuple(str(example) for example in examples)
        if not isinstance(consent, str):
            raise ToolDefinitionError(f"tool {self.name!r}: consent must be a string")
        self.consent = " ".join(consent.split())
        self.side_effect = side_effect
        self.live_state = live_state
        self.args_model, self.context_parameter = _args_model(function, self.name, arg_docs)
        functools.update_wrapper(self, function)
        # checks the name and flags now, not when an agent first binds the tool
        self._template = self._tool(None)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} {list(self._template.flags())}>"

    @property
    def needs_context(self) -> bool:
        """True when the function takes a :class:`ToolContext` parameter."""
        return self.context_parameter is not None

    def bind(self, context: ToolContext | None = None) -> Tool[BaseModel]:
        """The registry's tool, calling the function with *context* where it asks for one."""
        if self.needs_context and context is None:
            raise ToolDefinitionError(
                f"tool {self.name!r} takes a ToolContext: bind it to an agent first"
            )
        return self._tool(context)

    def _tool(self, context: ToolContext | None) -> Tool[BaseModel]:
        function, parameter = self.function, self.context_parameter
        fields = tuple(self.args_model.model_fields)

        def handler(args: BaseModel) -> object:
            values: dict[str, Any] = {name: getattr(args, name) for name in fields}
            if parameter is not None:
                values[parameter] = context
            return function(**values)  # type: ignore[call-arg]

        return Tool(
            name=self.name,
            description=self.description,
            args_model=self.args_model,
            handler=handler,
            side_effect=self.side_effect,
            live_state=self.live_state,
            examples=self.examples,
            consent=self.consent,
        )


@overload
def tool(function: Callable[P, R], /) -> ToolFunction[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    live_state: bool = False,
    examples: Sequence[str] = (),
    consent: str = "",
) -> Callable[[Callable[P, R]], ToolFunction[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    live_state: bool = False,
    examples: Sequence[str] = (),
    consent: str = "",
) -> ToolFunction[P, R] | Callable[[Callable[P, R]], ToolFunction[P, R]]:
    """Make a typed function (sync or ``async``) a tool; see the module docstring.

    ``side_effect=True``: it changes something, so the planner asks the user's consent before
    every call. ``live_state=True``: a read whose answer can change outside the chat, re-run
    before planning a request about it. ``examples``: requests the tool serves, stored for
    routing. ``consent``: what a call does, said in the question asked before it (for a
    side-effecting tool; the description is used without it). ``name``/``description``
    override the function's own.
    """

    def wrap(target: Callable[P, R]) -> ToolFunction[P, R]:
        return ToolFunction(
            target,
            name=name,
            description=description,
            side_effect=side_effect,
            live_state=live_state,
            examples=examples,
            consent=consent,
        )

    return wrap if function is None else wrap(function)


def as_tool(value: object, context: ToolContext | None = None) -> Tool[Any]:
    """A registry tool from a :class:`ToolFunction`, a :class:`Tool` or a plain typed function
    (which becomes a read-only tool, as if decorated with a bare ``@tool``)."""
    if isinstance(value, Tool):
        return value
    if isinstance(value, ToolFunction):
        return value.bind(context)
    if callable(value) and not isinstance(value, type):
        return ToolFunction(value).bind(context)
    raise ToolDefinitionError(f"not a tool or a function: {value!r}")


# -- the argument schema ----------------------------------------------------------------------


def _args_model(
    function: Callable[..., object], tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    """The pydantic model of *function*'s arguments, and the name of its context parameter."""
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError, ValueError) as error:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot read its type hints: {error}"
        ) from None
    fields: dict[str, Any] = {}
    context: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: *args/**kwargs cannot be described to a model"
            )
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {parameter.name!r} is positional-only"
            )
        if parameter.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {parameter.name!r} has no type hint"
            )
        hint = hints[parameter.name]
        if hint is ToolContext:
            context = parameter.name
            continue
        fields[parameter.name] = _field(hint, parameter, arg_docs.get(parameter.name, ""))
    model_name = "".join(part.capitalize() for part in tool_name.split("_")) + "Args"
    try:
        model = create_model(
            model_name,
            __config__=ConfigDict(extra="forbid", frozen=True),
            __module__=getattr(function, "__module__", __name__),
            **fields,
        )
        model.model_json_schema()
    except Exception as error:  # a type pydantic cannot validate or describe
        raise ToolDefinitionError(f"tool {tool_name!r}: {type(error).__name__}: {error}") from None
    assert isinstance(model, type)
    assert issubclass(model, BaseModel)
    return model, context


def _field(hint: Any, parameter: inspect.Parameter, documented: str) -> tuple[Any, Any]:  # noqa: ANN401 - a type hint
    """``(annotation, default)`` for one parameter: a plain string in ``Annotated`` metadata
    (or the docstring's ``Args:`` entry) becomes the field's description."""
    if typing.get_origin(hint) is Annotated:
        base, *metadata = typing.get_args(hint)
        texts = [item for item in metadata if isinstance(item, str)]
        kept = [item for item in metadata if not isinstance(item, str)]
        described = any(isinstance(item, FieldInfo) and item.description for item in kept)
        if texts and not described:
            kept.append(Field(description=" ".join(texts)))
            described = True
        if documented and not described:
            kept.append(Field(description=documented))
        hint = Annotated[(base, *kept)] if kept else base
    elif documented:
        hint = Annotated[hint, Field(description=documented)]
    default = ... if parameter.default is parameter.empty else parameter.default
    return hint, default


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (the text before any section) and the ``Args:`` entries."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        heading = _SECTION_RE.match(line)
        if heading:
            section = heading.group(1)
            current = None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            entry = _ARG_LINE_RE.match(line)
            if entry and (line[: len(line) - len(line.lstrip())].count(" ") <= 4):
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args
