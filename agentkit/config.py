"""An agent's ``config.json``, validated strictly.

Config files are a trust boundary: an unknown key (a typo such as ``"modle"``) or a bad value is
a :class:`~agentkit.errors.ConfigError` naming the file and the field, never silently ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkit.errors import ConfigError

__all__ = ["AgentConfig", "CompressionConfig", "PlannerConfig", "load_agent_config"]

Engine = Literal["chat", "planner"]
Strategy = Literal["plan_replan", "next_step", "tool_loop"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CompressionConfig(_Config):
    """Compress when the window holds more than ``max_messages`` messages *and* more than
    ``token_threshold`` estimated tokens; keep the last ``keep_recent`` (the seed's N, T, K)."""

    max_messages: int = Field(default=12, ge=1)
    token_threshold: int = Field(default=900, ge=1)
    keep_recent: int = Field(default=12, ge=0)
    #: after each completed planner turn, fold the last this-many messages into TaskState
    #: (one ``summarize`` call; the seed's incremental update used 6). 0 turns it off.
    incremental_messages: int = Field(default=0, ge=0, le=64)


class PlannerConfig(_Config):
    """``plan_replan``: a whole plan, a replan decision after each tool or reason step.
    ``next_step``: one batch of steps at a time, the next batch planned from their results.
    ``tool_loop``: one tool call per model call (native function calling where the backend
    has it, a JSON action otherwise) until the model answers.

    ``classify``: besides the keyword sets, ask the model (purpose ``classify``) whether a
    request is about live configuration. ``stage_timeout_scale`` multiplies the per-stage
    timeouts (a small local model on two cores needs more than the seed's figures)."""

    strategy: Strategy = "plan_replan"
    max_steps: int = Field(default=8, ge=1, le=64)
    max_iterations: int = Field(default=12, ge=1, le=256)
    classify: bool = False
    stage_timeout_scale: float = Field(default=1.0, gt=0, le=100)


class AgentConfig(_Config):
    """What ``agents/{agentId}/config.json`` may hold. Every key is optional."""

    v: Literal[1] = 1
    name: str = ""
    description: str = ""
    model: str = Field(default="llama", min_length=1, description="model spec, e.g. llama")
    engine: Engine = "chat"
    max_turns: int = Field(default=20, ge=1, description="chatHistory window, in turns")
    tools: tuple[str, ...] = ()
    compression: CompressionConfig = CompressionConfig()
    planner: PlannerConfig = PlannerConfig()


def load_agent_config(path: Path) -> AgentConfig:
    """Read and validate *path*; a missing file means all defaults."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AgentConfig()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(path, "", f"cannot be read: {error}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigError(
            path, "", f"is not valid JSON (line {error.lineno}, column {error.colno})"
        ) from None
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        more = error.error_count() - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(path, field, f"{problem}{suffix}") from None
