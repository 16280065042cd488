"""``@tool``: typed functions become tools; the registry's guarantees hold for them too."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import pytest
from agentkit import tool
from agentkit.tools import (
    SchemaArgs,
    ToolArgumentsError,
    ToolContext,
    ToolCrashedError,
    ToolDefinitionError,
    ToolFailedError,
    ToolFunction,
    ToolRegistry,
    as_tool,
)
from agentkit.tools.registry import schema_args_model
from pydantic import BaseModel, ConfigDict, Field


class Color(StrEnum):
    red = "red"
    green = "green"


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


@tool
def ship(
    item: Annotated[str, "what to ship"],
    to: Address,
    color: Color = Color.red,
    count: Annotated[int, Field(ge=1, le=10)] = 1,
    gift: bool = False,
) -> dict[str, object]:
    """Ship an item to an address.

    Args:
        gift: wrap it as a gift
            (paper included)
    """
    return {"item": item, "city": to.city, "color": color, "count": count, "gift": gift}


def test_schema_comes_from_type_hints_defaults_enums_nested_models_and_descriptions() -> None:
    assert isinstance(ship, ToolFunction)
    bound = ship.bind()
    assert bound.name == "ship"
    assert bound.description == "Ship an item to an address."
    assert bound.flags() == ("read",)
    schema = bound.json_schema()
    props = schema["properties"]
    assert isinstance(props, dict)
    assert schema["required"] == ["item", "to"]
    assert props["item"] == {"description": "what to ship", "type": "string"}
    assert props["color"] == {"enum": ["red", "green"], "type": "string", "default": "red"}
    assert props["count"] == {"default": 1, "maximum": 10, "minimum": 1, "type": "integer"}
    assert props["gift"]["description"] == "wrap it as a gift (paper included)"  # type: ignore[index]
    nested = props["to"]
    assert isinstance(nested, dict)
    assert nested["properties"] == {
        "city": {"type": "string"},
        "zip_code": {"pattern": "^[0-9]{5}$", "type": "string"},
    }
    assert schema["additionalProperties"] is False


def test_the_decorated_function_is_still_the_function() -> None:
    assert ship("book", Address(city="Paris", zip_code="75001"))["city"] == "Paris"
    assert ship.__name__ == "ship"
    assert "Ship an item" in (ship.__doc__ or "")


def test_arguments_are_validated_before_the_function_runs() -> None:
    calls: list[str] = []

    @tool
    def record(text: str, times: int = 1) -> int:
        """Record text."""
        calls.append(text)
        return times

    registry = ToolRegistry([record.bind(), ship.bind()])
    for bad in ({}, {"text": "x", "times": "many"}, {"text": "x", "extra": 1}):
        with pytest.raises(ToolArgumentsError):
            registry.run("record", bad)
    with pytest.raises(ToolArgumentsError) as caught:
        registry.run("ship", {"item": "x", "to": {"city": "P", "zip_code": "nope"}})
    assert caught.value.field == "to.zip_code"
    with pytest.raises(ToolArgumentsError) as caught:
        registry.run(
            "ship", {"item": "x", "to": {"city": "P", "zip_code": "75001"}, "color": "blue"}
        )
    assert caught.value.field == "color"
    assert calls == []
    result = registry.run("ship", {"item": "x", "to": {"city": "P", "zip_code": "75001"}})
    assert result.ok
    assert result.output == {"item": "x", "city": "P", "color": "red", "count": 1, "gift": False}


def test_flags_examples_and_overrides() -> None:
    @tool(side_effect=True, examples=["delete note 3", "删掉第 3 条"])
    def delete(note_id: int) -> None:
        """Delete a note."""

    @tool(live_state=True, name="current_notes", description="The notes now.")
    def notes() -> list[str]:
        return []

    assert delete.bind().flags() == ("side_effect",)
    assert delete.bind().examples == ("delete note 3", "删掉第 3 条")
    assert notes.bind().name == "current_notes"
    assert notes.bind().flags() == ("read", "live_state")
    assert notes.bind().description == "The notes now."
    assert delete.bind().with_flags(side_effect=False).flags() == ("read",)
    assert notes.bind().with_flags(side_effect=True).flags() == ("side_effect",)


def test_async_tools_run_from_sync_and_async_callers() -> None:
    @tool
    async def slow_double(value: int) -> int:
        """Double a number, eventually."""
        await asyncio.sleep(0)
        return value * 2

    registry = ToolRegistry([slow_double.bind()])
    assert registry.run("slow_double", {"value": 4}).output == 8
    assert asyncio.run(registry.arun("slow_double", {"value": 5})).output == 10

    async def inside_a_running_loop() -> object:  # e.g. Jupyter calling the sync API
        return registry.run("slow_double", {"value": 6}).output

    assert asyncio.run(inside_a_running_loop()) == 12


def test_domain_failures_and_crashes_stay_apart_and_secrets_are_masked() -> None:
    @tool
    def connect(api_key: str, host: str) -> dict[str, str]:
        """Connect somewhere."""
        if host == "down":
            raise ToolFailedError(f"host {host} refused key {api_key}")
        if host == "bug":
            raise KeyError(api_key)
        return {"host": host, "api_key": api_key, "echo": f"used {api_key}"}

    registry = ToolRegistry([connect.bind()])
    secret = "sk-live-0123456789abcdef"
    ok = registry.run("connect", {"api_key": secret, "host": "h"})
    assert secret not in ok.text and "****cdef" in ok.text
    failed = registry.run("connect", {"api_key": secret, "host": "down"})
    assert not failed.ok and failed.error is not None and secret not in failed.error
    with pytest.raises(ToolCrashedError) as crashed:
        asyncio.run(registry.arun("connect", {"api_key": secret, "host": "bug"}))
    assert secret not in str(crashed.value)


def test_a_context_parameter_is_injected_not_described(tmp_path: Path) -> None:
    @tool
    def where(ctx: ToolContext, name: str) -> str:
        """Where a file of the agent lives."""
        return str(ctx.workspace / name)

    assert "ctx" not in where.bind(ToolContext("a1", tmp_path)).json_schema().get("properties", {})
    with pytest.raises(ToolDefinitionError, match="ToolContext"):
        where.bind()
    registry = ToolRegistry([where.bind(ToolContext("a1", tmp_path))])
    assert registry.run("where", {"name": "x"}).output == str(tmp_path / "workspace" / "x")


def test_plain_functions_become_read_only_tools() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    made = as_tool(shout)
    assert made.flags() == ("read",)
    assert ToolRegistry([made]).run("shout", {"text": "hi"}).output == "HI"


def untyped(x):  # type: ignore[no-untyped-def]
    """No hints."""


def test_bad_definitions_are_refused_when_decorated() -> None:
    with pytest.raises(ToolDefinitionError, match="no type hint"):
        tool(untyped)
    with pytest.raises(ToolDefinitionError, match="no description"):

        @tool
        def silent(x: int) -> int:
            return x

    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool
        def spread(*values: int) -> int:
            """Sum."""
            return sum(values)

    with pytest.raises(ToolDefinitionError, match="snake_case"):
        tool(name="Bad-Name")(ship.function)
    with pytest.raises(ToolDefinitionError, match="live_state marks a read"):

        @tool(side_effect=True, live_state=True)
        def both() -> None:
            """Both."""


def test_schema_defined_tools_check_arguments_with_jsonschema() -> None:
    model = schema_args_model(
        "get-time",
        {
            "type": "object",
            "properties": {
                "timezone": {"type": "string"},
                "hour": {"type": "integer", "minimum": 0},
            },
            "required": ["timezone"],
        },
    )
    assert issubclass(model, SchemaArgs)
    assert model.problems({"timezone": "UTC"}) == []
    assert model.problems({}) == [("timezone", "missing required argument")]
    assert model.problems({"timezone": "UTC", "tz": 1}) == [("tz", "unexpected argument")]
    problems = model.problems({"timezone": "UTC", "hour": -1})
    assert problems == [("hour", "violates minimum 0")]
    secret = model.problems({"timezone": 12345})
    assert "12345" not in str(secret)  # messages never quote the offending value
    assert model.model_validate({"timezone": "UTC"}).arguments() == {"timezone": "UTC"}
