"""The tool registry: validation before execution, bounded masked results, rendering."""

from __future__ import annotations

import json

import pytest
from agentkit.errors import AgentkitError, UsageError
from agentkit.tools import (
    Tool,
    ToolArgumentsError,
    ToolCrashedError,
    ToolDefinitionError,
    ToolFailedError,
    ToolRegistry,
    UnknownToolError,
    is_secret_key,
    mask_secrets,
    mask_value,
    scrub_text,
)
from pydantic import BaseModel, ConfigDict, Field


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    times: int = Field(default=1, ge=1)


class EchoArgsV2(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    times: int = Field(default=1, ge=1)
    loud: bool = False


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Spy:
    """A handler that records every call."""

    def __init__(self, result: object = None) -> None:
        self.calls: list[BaseModel] = []
        self.result = result

    def __call__(self, args: BaseModel) -> object:
        self.calls.append(args)
        return self.result


def echo_tool(spy: Spy | None = None, *, args_model: type[BaseModel] = EchoArgs) -> Tool[BaseModel]:
    return Tool(
        name="echo",
        description="Repeat text.",
        args_model=args_model,
        handler=spy or (lambda args: {"echo": args.text * args.times}),  # type: ignore[attr-defined]
        side_effect=False,
        live_state=False,
    )


def write_tool(handler: Spy) -> Tool[BaseModel]:
    return Tool(
        name="write_note",
        description="Write a note.",
        args_model=EchoArgs,
        handler=handler,
        side_effect=True,
        live_state=False,
    )


def snapshot_tool() -> Tool[BaseModel]:
    return Tool(
        name="get_state",
        description="Read the state.",
        args_model=NoArgs,
        handler=lambda _: {"state": "ok"},
        side_effect=False,
        live_state=True,
    )


def test_run_validates_then_calls_the_handler() -> None:
    registry = ToolRegistry([echo_tool()])
    result = registry.run("echo", {"text": "ab", "times": 2})
    assert result.ok
    assert result.output == {"echo": "abab"}
    assert json.loads(result.text) == {"echo": "abab"}
    assert not result.truncated


def test_unknown_tool_lists_the_known_ones() -> None:
    registry = ToolRegistry([echo_tool(), snapshot_tool()])
    with pytest.raises(UnknownToolError) as caught:
        registry.run("rm_rf", {})
    assert isinstance(caught.value, UsageError)
    assert "'rm_rf'" in str(caught.value)
    assert "echo" in str(caught.value)
    assert "get_state" in str(caught.value)
    with pytest.raises(UnknownToolError):
        registry.get("nope")


def test_extra_args_are_rejected_and_the_handler_is_not_called() -> None:
    spy = Spy({"ok": True})
    registry = ToolRegistry([echo_tool(spy)])
    with pytest.raises(ToolArgumentsError) as caught:
        registry.run("echo", {"text": "x", "path": "../../etc/passwd"})
    assert caught.value.tool == "echo"
    assert caught.value.field == "path"
    assert "unexpected argument" in str(caught.value)
    assert spy.calls == []


def test_wrong_types_name_the_field_and_never_run_the_tool() -> None:
    spy = Spy({"ok": True})
    registry = ToolRegistry([echo_tool(spy)])
    with pytest.raises(ToolArgumentsError) as caught:
        registry.run("echo", {"text": "x", "times": "many"})
    assert caught.value.field == "times"
    assert "'times'" in str(caught.value)
    assert "echo" in str(caught.value)
    with pytest.raises(ToolArgumentsError) as missing:
        registry.run("echo", {})
    assert missing.value.field == "text"
    assert "missing" in str(missing.value)
    with pytest.raises(ToolArgumentsError) as not_object:
        registry.run("echo", ["x"])  # type: ignore[arg-type]
    assert not_object.value.field == ""
    assert spy.calls == []


def test_validate_returns_the_model_and_never_runs() -> None:
    spy = Spy()
    registry = ToolRegistry([echo_tool(spy)])
    args = registry.validate("echo", {"text": "hi"})
    assert args == EchoArgs(text="hi")
    assert spy.calls == []


def test_argument_errors_do_not_quote_the_values() -> None:
    registry = ToolRegistry([echo_tool()])
    with pytest.raises(ToolArgumentsError) as caught:
        registry.run("echo", {"text": "x", "api_key": "sk-verysecretvalue-123456"})
    assert "verysecret" not in str(caught.value)


def test_a_domain_failure_becomes_a_failed_result() -> None:
    def fail(_: EchoArgs) -> object:
        raise ToolFailedError("no such thing 'x'")

    registry = ToolRegistry(
        [
            Tool(
                name="f",
                description="d",
                args_model=EchoArgs,
                handler=fail,
                side_effect=False,
                live_state=False,
            )
        ]
    )
    result = registry.run("f", {"text": "x"})
    assert not result.ok
    assert result.output is None
    assert result.error == "no such thing 'x'"
    assert json.loads(result.text) == {"error": "no such thing 'x'"}


def test_a_crashing_handler_raises_with_the_cause_chained() -> None:
    def crash(_: EchoArgs) -> object:
        raise ZeroDivisionError("boom")

    registry = ToolRegistry(
        [
            Tool(
                name="c",
                description="d",
                args_model=EchoArgs,
                handler=crash,
                side_effect=False,
                live_state=False,
            )
        ]
    )
    with pytest.raises(ToolCrashedError) as caught:
        registry.run("c", {"text": "x"})
    assert isinstance(caught.value, AgentkitError)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert caught.value.tool == "c"


def test_output_is_truncated_with_a_marker() -> None:
    registry = ToolRegistry([echo_tool(Spy({"blob": "x" * 10_000}))], max_output_chars=500)
    result = registry.run("echo", {"text": "x"})
    assert result.ok
    assert result.truncated
    assert len(result.text) <= 500
    assert "truncated" in result.text
    assert result.output == {"blob": "x" * 10_000}
    default = ToolRegistry([echo_tool(Spy({"blob": "x" * 10_000}))]).run("echo", {"text": "x"})
    assert len(default.text) <= 4000
    assert default.truncated


def test_result_outputs_mask_secret_keys_and_known_values() -> None:
    payload = {"api_key": "sk-live-0123456789abcd", "note": "uses sk-other-secret-99"}
    registry = ToolRegistry([echo_tool(Spy(payload))], secrets=lambda: ["sk-other-secret-99"])
    result = registry.run("echo", {"text": "x"})
    assert "0123456789" not in result.text
    assert "sk-other-secret-99" not in result.text
    assert result.output == {"api_key": "****abcd", "note": "uses ****t-99"}


def test_render_names_every_tool_its_flags_and_its_arguments() -> None:
    registry = ToolRegistry([echo_tool(), write_tool(Spy()), snapshot_tool()])
    text = registry.render()
    for name in registry.names():
        assert f"- {name} [" in text
    assert "- write_note [side_effect]" in text
    assert "- get_state [read, live_state]" in text
    assert "- echo [read]" in text
    assert '"times"' in text
    assert '"required":["text"]' in text
    assert '"title"' not in text


def test_schema_signature_is_stable_and_tracks_schemas() -> None:
    first = ToolRegistry([echo_tool(), snapshot_tool()]).schema_signature()
    again = ToolRegistry([echo_tool(), snapshot_tool()]).schema_signature()
    reordered = ToolRegistry([snapshot_tool(), echo_tool()]).schema_signature()
    changed = ToolRegistry([echo_tool(args_model=EchoArgsV2), snapshot_tool()]).schema_signature()
    fewer = ToolRegistry([echo_tool()]).schema_signature()
    assert first == again == reordered
    assert changed != first
    assert fewer != first


def test_subset_follows_the_allow_list_and_rejects_unknown_names() -> None:
    registry = ToolRegistry([echo_tool(), write_tool(Spy()), snapshot_tool()])
    subset = registry.subset(["get_state", "echo", "echo"])
    assert subset.names() == ("get_state", "echo")
    assert "write_note" not in subset
    with pytest.raises(UnknownToolError) as caught:
        registry.subset(["echo", "shell_exec"])
    assert caught.value.names == ("shell_exec",)
    assert [tool.name for tool in registry.live_state_tools()] == ["get_state"]


def test_tool_definitions_are_checked() -> None:
    class Loose(BaseModel):
        text: str

    with pytest.raises(ToolDefinitionError):
        Tool(
            name="Bad-Name",
            description="d",
            args_model=EchoArgs,
            handler=Spy(),
            side_effect=False,
            live_state=False,
        )
    with pytest.raises(ToolDefinitionError, match="extra='forbid'"):
        Tool(
            name="loose",
            description="d",
            args_model=Loose,
            handler=Spy(),
            side_effect=False,
            live_state=False,
        )
    with pytest.raises(ToolDefinitionError):
        ToolRegistry([echo_tool(), echo_tool()])


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("secret_key", True),
        ("secretKey", True),
        ("passphrase", True),
        ("access_token", True),
        ("private_key", True),
        ("password", True),
        ("max_tokens", False),
        ("input_tokens", False),
        ("key", False),
        ("model", False),
        ("account_name", False),
    ],
)
def test_secret_key_names(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_masking_keeps_at_most_the_last_four_characters() -> None:
    assert mask_value("sk-live-0123456789abcd") == "****abcd"
    assert mask_value("short") == "****"
    assert mask_value("") == ""
    nested = {"a": [{"secret_key": "abcdefghijklmnop"}], "max_tokens": 5, "token": None}
    assert mask_secrets(nested) == {
        "a": [{"secret_key": "****mnop"}],
        "max_tokens": 5,
        "token": None,
    }
    assert scrub_text("key=abcdefghijklmnop!", ["abcdefghijklmnop", "ab"]) == "key=****mnop!"
