"""An agent's ``config.json``, validated strictly.

Config files are a trust boundary: an unknown key (a typo such as ``"modle"``) or a bad value is
a :class:`~agentkit.errors.ConfigError` naming the file and the field, never silently ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentkit.errors import ConfigError

__all__ = [
    "AcpConfig",
    "AgentConfig",
    "ClientMcpConfig",
    "CompressionConfig",
    "CompressionStrategy",
    "McpToolsetConfig",
    "McpUrlToolsetConfig",
    "PlannerConfig",
    "PythonToolsetConfig",
    "ToolFlags",
    "ToolsetConfig",
    "add_strategy_name",
    "config_field",
    "load_agent_config",
]

Engine = Literal["chat", "planner"]

#: the planner strategies a config may name: the built-in ones, and every strategy registered
#: with :func:`agentkit.planning.register_strategy` (which adds its name here)
_STRATEGY_NAMES: list[str] = ["plan_replan", "next_step", "tool_loop"]


def add_strategy_name(name: str) -> None:
    """Let configs name planner strategy *name* (``register_strategy`` calls this)."""
    if name not in _STRATEGY_NAMES:
        _STRATEGY_NAMES.append(name)


def _known_strategy(name: str) -> str:
    if name not in _STRATEGY_NAMES:
        quoted = [repr(known) for known in _STRATEGY_NAMES]
        expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": expected}
        )
    return name


#: a planner strategy's name (see :mod:`agentkit.planning.strategies`)
Strategy = Annotated[str, AfterValidator(_known_strategy)]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: how compression (and the incremental update) writes TaskState (:mod:`agentkit.memory.strategies`)
CompressionStrategy = Literal["model", "extractive", "hybrid"]


class CompressionConfig(_Config):
    """Compress when the window holds more than ``max_messages`` messages *and* more than
    ``token_threshold`` estimated tokens; keep the last ``keep_recent`` (the seed's N, T, K).

    ``strategy``: ``model`` (the model's structured summary), ``extractive`` (no model call:
    the facts the user stated, picked by rule) or ``hybrid`` (the model's goal, flow, open
    loops and decision; the extractive facts plus the model's grounded ones). Model-written
    facts are grounded against the summarised window (:mod:`agentkit.memory.grounding`).
    ``max_facts`` and ``fact_tokens`` bound the important facts the extractive part keeps.
    ``wait_seconds``: how long the next turn of a conversation waits for the background
    upkeep of the previous one (past it the upkeep is cancelled: TaskState stays as it was)."""

    max_messages: int = Field(default=12, ge=1)
    token_threshold: int = Field(default=900, ge=1)
    keep_recent: int = Field(default=12, ge=0)
    #: after each completed planner turn, fold the last this-many messages into TaskState
    #: (one ``summarize`` call; the seed's incremental update used 6). 0 turns it off.
    incremental_messages: int = Field(default=0, ge=0, le=64)
    strategy: CompressionStrategy = "model"
    max_facts: int = Field(default=16, ge=1, le=256)
    fact_tokens: int = Field(default=400, ge=16, le=8192)
    wait_seconds: float = Field(default=120.0, gt=0, le=3600)


#: a named set of planner settings: ``plain`` (the model chooses and writes arguments freely;
#: the gate checks reads, repeats, grounding of side-effecting arguments and consent) or
#: ``small_model`` (what helps a small local model: the tool-choice router, said values, and
#: the follow-up rule in the gate) — explicit keys in the config still win
Preset = Literal["plain", "small_model"]
GateRule = Literal["reads", "repeat", "follow_up", "grounding", "consent"]
_PRESETS: dict[str, dict[str, object]] = {
    "plain": {},
    "small_model": {
        "tool_choice": "router",
        "argument_values": "said",
        "answers": "observed",
        "labelled_arguments": True,
    },
}
#: the gate's rules when the config names none (``follow_up`` acts only with the router on)
DEFAULT_GATE: tuple[GateRule, ...] = ("reads", "repeat", "follow_up", "grounding", "consent")


class EmbeddedModelPlanner(_Config):
    """What an agent's planner changes when its model is the embedded one (``llama`` or
    ``llama:PATH``): the strategy and tool choice that work on a small local model, for an
    agent whose config is written for stronger ones (``planner.for_embedded_model``)."""

    preset: Preset | None = None
    strategy: Strategy | None = None
    tool_choice: Literal["model", "router"] | None = None
    stage_timeout_scale: float | None = Field(default=None, gt=0, le=100)
    argument_values: Literal["free", "said"] | None = None

    def apply(self, planner: PlannerConfig) -> PlannerConfig:
        changes = {name: value for name, value in self if value is not None}
        if not changes:
            return planner
        if "preset" in changes:  # the preset's defaults for what the config leaves unset
            given = planner.model_dump(include=planner.model_fields_set - {"for_embedded_model"})
            return PlannerConfig.model_validate({**given, **changes})
        return planner.model_copy(update=changes)


class PlannerConfig(_Config):
    """``plan_replan``: a whole plan, a replan decision after each tool or reason step.
    ``next_step``: one batch of steps at a time, the next batch planned from their results.
    ``tool_loop``: one tool call per model call (native function calling where the backend
    has it, a JSON action otherwise) until the model answers.

    ``classify``: besides the keyword sets, ask the model (purpose ``classify``) whether a
    request is about live configuration. ``stage_timeout_scale`` multiplies the per-stage
    timeouts (a small local model on two cores needs more than the seed's figures)."""

    #: the named set of settings this planner starts from (see :data:`Preset`)
    preset: Preset = "plain"
    strategy: Strategy = "plan_replan"
    max_steps: int = Field(default=8, ge=1, le=64)
    max_iterations: int = Field(default=12, ge=1, le=256)
    classify: bool = False
    stage_timeout_scale: float = Field(default=1.0, gt=0, le=100)
    #: words that make a request one about live state (matched case-folded, anywhere in the
    #: message): the planner then re-runs the agent's ``live_state`` tools before planning
    live_state_keywords: tuple[Annotated[str, StringConstraints(min_length=1)], ...] = ()
    #: how a new request's first action is chosen: ``model`` (the strategy's own plan or action
    #: call, over every tool) or ``router`` (:mod:`agentkit.planning.tool_choice`: the tools
    #: ranked for the request; the model votes only among near-tied candidates)
    tool_choice: Literal["model", "router"] = "model"
    #: how many ranked tools the router keeps as candidates (the model votes among the near-tied)
    router_candidates: int = Field(default=3, ge=1, le=16)
    #: what the router ranks and decides with: ``lexical`` (shared words), ``semantic``
    #: (embeddings of the request and of each tool's description and examples, where the
    #: backend has them) and ``settle`` (no or only weak candidates, and not small talk: the
    #: model chooses among the tools and "none"); ``["lexical"]`` is the word-only router
    router_signals: tuple[Literal["lexical", "semantic", "settle"], ...] = Field(
        default=("lexical", "semantic", "settle"), min_length=1
    )
    #: where the router's semantic signal gets its vectors: ``model`` (the agent's own model,
    #: where it gives embeddings) or ``wordllama`` (a sentence embedder shipped in its wheel;
    #: the ``router`` extra) — :mod:`agentkit.planning.tool_semantics`
    router_embedder: Literal["model", "wordllama"] = "model"
    #: the meaning floor of a tool the words pick (``wordllama`` embedder only; None: none):
    #: a lexical candidate is routed only when the request's raw cosine with one of its texts
    #: is at least this, else it is dropped (none left: "no tool", without a model call)
    router_min_similarity: float | None = Field(default=None, ge=-1, le=1)
    #: the meaning floor of a request the words do not settle (``wordllama`` only; None:
    #: none): the model's settling vote runs only when a tool is at least this close, else
    #: the request is "no tool" without a model call
    router_settle_similarity: float | None = Field(default=None, ge=-1, le=1)
    #: which calls must have grounded required arguments before they are proposed
    #: (:mod:`agentkit.planning.grounding`): ``side_effect`` (those that need consent) or
    #: ``all`` (every call: a world whose state-changing tools run without consent)
    grounding: Literal["side_effect", "all"] = "side_effect"
    #: what a tool argument the model writes may hold (:mod:`agentkit.planning.schemas`):
    #: ``free`` (anything its type allows) or ``said`` (a free string or number is decoded
    #: only as one the conversation holds: the user's words, earlier tools' strings, numbers
    #: said; for backends that take a JSON schema — a grammar for the embedded model)
    argument_values: Literal["free", "said"] = "free"
    #: the gate's rules, in order (:mod:`agentkit.planning.gate`); None: :data:`DEFAULT_GATE`
    gate: tuple[GateRule, ...] | None = None
    #: router: candidates whose score is within this factor of the leader's are put to the
    #: model's vote (fitted on the first-tool tables' dev rows)
    router_near_tie: float = Field(default=1.25, ge=1.0, le=10.0)
    #: router: a leader whose lexical score is below this matched one weak term at best, and
    #: the model settles (fitted on the first-tool dev rows)
    router_weak_score: float = Field(default=1.0, ge=0.0, le=100.0)
    #: router: the likelihood vote's weight per nat against a candidate's share of the
    #: leader's score (first-tool dev rows: 0.05 to 0.5 gave the same decisions, 0 lost one)
    router_vote_weight: float = Field(default=0.1, ge=0.0, le=10.0)
    #: router: how many tools (best by meaning and words) the model settles among
    router_settle_pool: int = Field(default=3, ge=1, le=16)
    #: said values: the longest run of the user's words offered as one value
    said_span_words: int = Field(default=6, ge=1, le=32)
    #: said values: at most this many strings are offered (the grammar stays small)
    said_max_strings: int = Field(default=600, ge=1, le=10_000)
    #: a string argument the request names and gives a value to (*the front door code to
    #: 1234*) takes that value, whatever the model wrote (:func:`agentkit.planning.answers.
    #: labelled_values`; the ``small_model`` preset turns it on)
    labelled_arguments: bool = False
    #: how a turn that ran tools is answered: ``model`` (the model writes it from the
    #: observations) or ``observed`` (told from the tools' results, no model call:
    #: :mod:`agentkit.planning.observed`; what the ``small_model`` preset uses)
    answers: Literal["model", "observed"] = "model"
    #: seconds a pending approval stays valid (None: no limit); an expired one is rejected
    approval_ttl_seconds: float | None = Field(default=None, gt=0)
    #: what changes when the agent runs on the embedded model (see EmbeddedModelPlanner)
    for_embedded_model: EmbeddedModelPlanner | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:  # noqa: ANN401 - pydantic's raw input
        """The preset's settings for every key the config leaves unset."""
        if isinstance(data, dict) and data.get("preset") in _PRESETS:
            return {**_PRESETS[str(data["preset"])], **data}
        return data

    def gate_rules(self) -> tuple[GateRule, ...]:
        """The gate's rules, in order: ``gate``, else :data:`DEFAULT_GATE`."""
        return self.gate if self.gate is not None else DEFAULT_GATE

    def for_model(self, spec: str) -> PlannerConfig:
        """This config for a turn on the model *spec* (``llama``/``llama:PATH`` apply
        ``for_embedded_model``; any other model, or none, gets it unchanged)."""
        embedded = spec == "llama" or spec.startswith("llama:")
        if embedded and self.for_embedded_model is not None:
            return self.for_embedded_model.apply(self)
        return self


_ToolsetName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


class ToolFlags(_Config):
    """Flags of one tool as this agent wants them (overriding the toolset's), and example
    requests it serves (for the tool-choice router; an MCP server's tools have none)."""

    side_effect: bool | None = None
    live_state: bool | None = None
    examples: tuple[Annotated[str, StringConstraints(min_length=1)], ...] | None = None
    #: what a call does, in the words of the question asked before a side-effecting call
    #: (the tool's description says it otherwise)
    consent: Annotated[str, StringConstraints(min_length=1, max_length=300)] | None = None

    @model_validator(mode="after")
    def _a_read_or_a_write(self) -> ToolFlags:
        if self.side_effect and self.live_state:
            raise ValueError("live_state marks a read; a side-effecting tool is not one")
        return self


class _ToolsetConfig(_Config):
    #: per tool name: flags that override the toolset's own (e.g. a read-only MCP tool the
    #: server did not mark ``readOnlyHint``)
    flags: dict[str, ToolFlags] = Field(default_factory=dict)


class PythonToolsetConfig(_ToolsetConfig):
    """``{"python": "tools.py"}`` (a file in the agent's folder) or ``"module:attribute"``."""

    python: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    name: _ToolsetName | None = None


class McpToolsetConfig(_ToolsetConfig):
    """``{"mcp": ["command", "arg", …], "name": "time"}``: an MCP server over stdio, run as a
    subprocess (no shell; ``env`` adds variables to its minimal environment)."""

    mcp: tuple[Annotated[str, StringConstraints(min_length=1)], ...] = Field(min_length=1)
    name: _ToolsetName
    env: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0, le=3600, description="seconds per call")


class McpUrlToolsetConfig(_ToolsetConfig):
    """``{"mcp_url": "http://127.0.0.1:PORT/mcp", "name": "notes"}``: a streamable-HTTP MCP
    server."""

    mcp_url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]
    name: _ToolsetName
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0, le=3600, description="seconds per call")


#: a tool of a client's MCP server as the ``acp.client_mcp`` lists name it: ``tool``,
#: ``server:tool`` or ``server:*``
_ClientToolName = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^:]+(:[^:]+)?$")]


class ClientMcpConfig(_Config):
    """Which of the MCP servers an ACP client passes in ``session/new``/``session/load``
    (``mcpServers``) ``agentkit acp`` starts for the session, and which of their tools are
    reads. ``mode``: ``off`` (the default: none are started, so a small model's prompt is
    not filled with a client's tools), ``all``, or ``allow`` (only the servers named in
    ``servers``; each lists the tools used from it, ``[]`` for all of them). ``read_only``:
    tools that run without consent (``tool``, ``server:tool`` or ``server:*``); every other
    client tool asks first unless its server marks it ``readOnlyHint``. Chat-engine agents
    never start client servers (they use no tools)."""

    mode: Literal["off", "all", "allow"] = "off"
    servers: dict[
        Annotated[str, StringConstraints(min_length=1)],
        tuple[Annotated[str, StringConstraints(min_length=1)], ...],
    ] = Field(default_factory=dict)
    read_only: tuple[_ClientToolName, ...] = ()

    @model_validator(mode="after")
    def _servers_only_for_allow(self) -> ClientMcpConfig:
        if self.mode == "allow" and not self.servers:
            raise ValueError("mode 'allow' needs 'servers': the servers (and tools) allowed")
        if self.mode != "allow" and self.servers:
            raise ValueError(f"'servers' is the allow-list of mode 'allow', not {self.mode!r}")
        return self


class AcpConfig(_Config):
    """How ``agentkit acp`` serves this agent: ``replay`` (false: ``session/load`` restores a
    conversation without replaying it, like ``--no-replay``) and the client MCP policy."""

    replay: bool = True
    client_mcp: ClientMcpConfig = ClientMcpConfig()


def _toolset_kind(value: Any) -> str | None:  # noqa: ANN401 - raw config being validated
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, dict):
        return None
    kinds = [kind for kind in ("python", "mcp", "mcp_url") if kind in value]
    return kinds[0] if len(kinds) == 1 else None


ToolsetConfig = Annotated[
    Annotated[PythonToolsetConfig, Tag("python")]
    | Annotated[McpToolsetConfig, Tag("mcp")]
    | Annotated[McpUrlToolsetConfig, Tag("mcp_url")],
    Discriminator(
        _toolset_kind,
        custom_error_type="toolset_kind",
        custom_error_message="a toolset needs exactly one of 'python', 'mcp' or 'mcp_url'",
    ),
]


class AgentConfig(_Config):
    """What ``agents/{agentId}/config.json`` may hold. Every key is optional."""

    v: Literal[1] = 1
    name: str = ""
    description: str = ""
    model: str = Field(default="llama", min_length=1, description="model spec, e.g. llama")
    engine: Engine = "chat"
    max_turns: int = Field(default=20, ge=1, description="chatHistory window, in turns")
    #: where the agent's tools come from (none: the agent has no tools)
    toolsets: tuple[ToolsetConfig, ...] = ()
    #: the allow-list: only these of the toolsets' tools (absent: all of them)
    tools: tuple[str, ...] | None = None
    compression: CompressionConfig = CompressionConfig()
    planner: PlannerConfig = PlannerConfig()
    #: ``agentkit acp``: replay on load, the policy for a client's MCP servers
    acp: AcpConfig = AcpConfig()

    @field_validator("toolsets")
    @classmethod
    def _unique_toolset_names(
        cls, toolsets: tuple[ToolsetConfig, ...]
    ) -> tuple[ToolsetConfig, ...]:
        names = [toolset.name for toolset in toolsets if toolset.name is not None]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two toolsets are named {twice[0]!r}")
        return toolsets


def config_field(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as a dotted field name, without the toolset kind tag
    pydantic inserts (``toolsets.0.mcp.name`` → ``toolsets.0.name``)."""
    parts = [str(part) for part in loc]
    if len(parts) > 2 and parts[0] == "toolsets" and parts[2] in ("python", "mcp", "mcp_url"):
        del parts[2]
    return ".".join(parts)


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
        field = config_field(first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        more = error.error_count() - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(path, field, f"{problem}{suffix}") from None
