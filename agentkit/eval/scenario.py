"""Evaluation scenarios: one agent, a starting state, turns, and what should come of them.

A scenario file (YAML or JSON, ``v: 1``) is a trust boundary: it is validated strictly, an
unknown key is a :class:`~agentkit.errors.ConfigError` naming the file and the field. What
depends on the agent is checked against its tools before any run
(:func:`check_against_tools`): a tool name the agent does not have (a misspelt
``tools_not_called`` entry would otherwise pass forever), a starting ``state`` for a toolset
it lacks or that the toolset's own ``state_model`` refuses. Scenarios are plain values: a run
never changes one, so the same object can be sent to any number of workers.

The agent's state is whatever its toolsets keep (a database, a notes file …):
``state`` seeds it by toolset name before the first turn, and an expectation's ``state`` is
matched against the toolsets' snapshots (:func:`~agentkit.eval.expectations.state_problems`).

Each turn may carry ``script``: the scripted model's replies for that turn, by purpose (the
same purpose maps as :class:`~agentkit.models.scripted.ScriptedModel`), which is what makes a
scenario run deterministically under ``--model scripted``. With any other model the scripts are
ignored and the expectations measure the model.

Instead of ``turns``, a scenario may have a ``simulated_user`` (one or the other): a persona, a
goal and what the user knows, played by a model (:mod:`agentkit.eval.simulator`) that writes
each next message after reading the agent's reply. Under ``--model scripted`` the user's
messages then come from ``user_script`` and the agent's replies from the scenario's ``script``
(by purpose, in call order over the whole run); only the scenario-level ``expect`` is checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentkit._extras import require
from agentkit.errors import ConfigError, UsageError
from agentkit.eval.judges.values import Judge
from agentkit.eval.scorer import RunScorer
from agentkit.eval.source_user import SourceUser
from agentkit.events import Scenario as SessionScenario
from agentkit.ids import ID_PATTERN
from agentkit.memory import ExecutionStatus, TaskState
from agentkit.models.base import Purpose
from agentkit.tools import AgentTools

__all__ = [
    "SCENARIO_SUFFIXES",
    "Comparator",
    "Expectations",
    "ExpectedCall",
    "NumericTolerance",
    "OutOfBandCall",
    "Scenario",
    "ScenarioMessage",
    "SimulatedUser",
    "Trajectory",
    "Turn",
    "check_against_tools",
    "load_scenario",
    "load_scenarios",
    "read_file",
]

SCENARIO_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json")

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_Id = Annotated[str, StringConstraints(pattern=f"^{ID_PATTERN}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_State = dict[
    Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")], JsonValue
]


# -- the starting state ---------------------------------------------------------------------------


class ScenarioMessage(_Strict):
    """An earlier message of the conversation (before the first turn)."""

    role: Literal["user", "assistant"]
    content: _Text


class OutOfBandCall(_Strict):
    """A tool the *user* runs between turns (``agentkit tool …``): a change made outside the
    chat, which the agent must notice."""

    tool: _Text
    args: dict[str, JsonValue] = Field(default_factory=dict)


# -- expectations ---------------------------------------------------------------------------------


class NumericTolerance(_Strict):
    """Numbers within *tolerance* of each other are equal (absolute difference)."""

    tolerance: float = Field(ge=0)


class Comparator(_Strict):
    """How one argument's value is compared (``case_insensitive`` for text, ``numeric`` with
    a tolerance for numbers; a number given as text, ``"12.5"``, is read as a number)."""

    case_insensitive: bool = False
    numeric: NumericTolerance | None = None

    @model_validator(mode="before")
    @classmethod
    def _by_name(cls, value: object) -> object:
        return {"case_insensitive": True} if value == "case_insensitive" else value


class ExpectedCall(_Strict):
    """One tool call of an expected trajectory: the tool, and the arguments to compare."""

    tool: _Text
    args: dict[str, JsonValue] = Field(default_factory=dict)


TrajectoryOrder = Literal["strict", "in_order", "any_order", "subset", "superset"]
ArgsMode = Literal["exact", "subset", "ignore"]


class Trajectory(_Strict):
    """The tool calls a run (or a turn) should make, and how strictly they are matched
    (:mod:`agentkit.eval.trajectory`).

    ``order``: ``strict`` the same calls in the same order, nothing else; ``in_order`` these
    calls in this order, others may come between; ``any_order`` the same calls in any order,
    nothing else; ``subset`` every call made is one of these (some may not be made);
    ``superset`` every one of these is made, in any order, others may be too.
    ``args``: ``exact`` a call's arguments are exactly these; ``subset`` these arguments with
    these values (the call may pass more); ``ignore`` only the tools are compared.
    ``comparators``: by argument name (every call's) or ``tool.argument``, how a value is
    compared. The planner's own re-reads of the live state are left out unless
    ``include_live_reads``."""

    calls: tuple[ExpectedCall, ...]
    order: TrajectoryOrder = "strict"
    args: ArgsMode = "exact"
    comparators: dict[_Text, Comparator] = Field(default_factory=dict)
    include_live_reads: bool = False


class Expectations(_Strict):
    """What should be true. At scenario level it is checked over the whole run (tools over
    every turn, the answer and statuses of the last turn, the state at the end); under a turn,
    over that turn and the state right after it. Unset fields are not checked.

    Tool expectations count the tools the agent *planned* (not the live-state snapshot the
    planner re-reads by itself, which ``live_state`` checks).
    """

    tools_called: tuple[str, ...] = ()
    tools_not_called: tuple[str, ...] = ()
    tool_sequence: tuple[str, ...] | None = Field(
        default=None, description="exactly these planned tool calls, in this order"
    )
    asked_user: bool | None = Field(default=None, description="a question was asked")
    new_plan: bool | None = Field(
        default=None,
        description="the planner started a new plan (false: it resumed the paused flow)",
    )
    consent_requested: bool | None = None
    consent_for: tuple[str, ...] = Field(
        default=(), description="a confirmation was asked naming each of these tools"
    )
    status: ExecutionStatus | Literal["none"] | None = Field(
        default=None, description="the ExecutionState status ('none': no plan on record)"
    )
    result_status: Literal["completed", "failed", "cancelled"] | None = None
    session: SessionScenario | None = Field(
        default=None, description="how the prompt was built: A new, B live session, C restored"
    )
    answer_contains: tuple[_Text, ...] = ()
    answer_not_contains: tuple[_Text, ...] = ()
    live_state: bool | None = Field(
        default=None, description="the planner re-read the live configuration first"
    )
    compressed: bool | None = None
    facts_in_task_state: tuple[_Text, ...] = Field(
        default=(), description="each fact is carried by TaskState (agentkit.memory.fidelity)"
    )
    no_errors: bool | None = None
    max_model_calls: int | None = Field(default=None, ge=0)
    state: _State | None = Field(
        default=None,
        description="by toolset name, a partial match of its state snapshot: mappings need "
        "the keys given, lists the same items in any order, values equality",
    )
    trajectory: Trajectory | None = Field(
        default=None,
        description="the tool calls with their arguments, matched by an order and an "
        "argument mode (agentkit.eval.trajectory)",
    )
    judges: tuple[Judge, ...] = Field(
        default=(),
        description="model judges of the whole run (scenario-level expect only): a rubric, "
        "what they see, graders and a vote (agentkit.eval.judges)",
    )

    @field_validator("judges")
    @classmethod
    def _judges_named_once(cls, judges: tuple[Judge, ...]) -> tuple[Judge, ...]:
        names = [judge.name for judge in judges]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"judge names are given twice: {twice}")
        return judges

    def tool_names(self) -> Iterator[tuple[str, str]]:
        """``(field, tool name)`` for every tool this names."""
        for field in ("tools_called", "tools_not_called", "consent_for", "tool_sequence"):
            for index, name in enumerate(getattr(self, field) or ()):
                yield f"{field}.{index}", name
        if self.trajectory is not None:
            for index, call in enumerate(self.trajectory.calls):
                yield f"trajectory.calls.{index}.tool", call.tool

    @property
    def is_empty(self) -> bool:
        return self == Expectations()


# -- turns and scenarios ------------------------------------------------------------------------

Script = dict[Purpose, list[JsonValue]]


class Approve(_Strict):
    """A turn that approves the pending tool call (by its approval id), optionally with
    edited arguments instead of the planned ones."""

    args: dict[str, JsonValue] | None = None


class Turn(_Strict):
    """One user message — or a decision on the pending approval (``approve:`` / ``reject:``
    instead of ``user:``) — what happens just before it, and the scripted replies for it."""

    user: _Text | None = None
    approve: Approve | None = Field(
        default=None, description="approve the pending call ({} as planned, {args: …} edited)"
    )
    reject: bool = Field(default=False, description="reject the pending call")
    before: tuple[OutOfBandCall, ...] = Field(
        default=(), description="tools the user runs outside the chat before this message"
    )
    restart: bool = Field(
        default=False, description="open the agent afresh first (a new process: scenario C)"
    )
    script: Script | None = Field(
        default=None, description="the scripted model's replies for this turn, by purpose"
    )
    expect: Expectations = Expectations()

    @field_validator("script")
    @classmethod
    def _replies_present(cls, script: Script | None) -> Script | None:
        return _check_script(script)

    @model_validator(mode="after")
    def _one_input(self) -> Turn:
        given = [self.user is not None, self.approve is not None, self.reject]
        if sum(given) != 1:
            raise ValueError("a turn has exactly one of 'user', 'approve' or 'reject'")
        if self.expect.judges:
            raise ValueError("judges go in the scenario's expect (they judge the whole run)")
        return self


def _check_script(script: Script | None) -> Script | None:
    for purpose, replies in (script or {}).items():
        if not replies:
            raise ValueError(f"purpose {purpose!r} has no replies")
    return script


class SimulatedUser(_Strict):
    """The user of a scenario played by a model: who they are, what they want, what they can
    tell when asked, and how they answer a consent request (in code, not by the model)."""

    persona: _Text = Field(description="who the user is and how they write")
    goal: _Text = Field(description="what the user wants from the conversation")
    knows: dict[_Text, JsonValue] = Field(
        default_factory=dict, description="what the user can tell when asked"
    )
    unknown_info: tuple[_Text, ...] = Field(
        default=(),
        description="what the user does not know and so must never say (the simulated-user "
        "check flags a message that does: agentkit.eval.sim_check)",
    )
    goal_contradictions: tuple[_Text, ...] = Field(
        default=(),
        description="phrases that would abandon the goal (the simulated-user check flags a "
        "message saying one)",
    )
    opening: _Text | None = Field(
        default=None, description="the first message (else the simulator writes it)"
    )
    consent: Literal["approve", "reject"] = Field(
        default="approve", description="how the user answers a consent request"
    )
    max_turns: int = Field(default=6, ge=1, le=50, description="user messages at most")


class Scenario(_Strict):
    """A scenario file. ``id`` defaults to the file name without its suffix."""

    v: Literal[1] = 1
    id: _Id
    title: str = ""
    language: Literal["zh", "en"]
    agent: _Id
    tags: tuple[_Text, ...] = ()
    config: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="a partial config.json merged over the agent's (before --set/--grid)",
    )
    state: _State = Field(
        default_factory=dict,
        description="by toolset name, the state a run starts from (each toolset validates "
        "its own, e.g. rows of its database)",
    )
    task_state: TaskState | None = Field(
        default=None, description="the conversation's TaskState before the first turn"
    )
    history: tuple[ScenarioMessage, ...] = Field(
        default=(), description="earlier messages of the conversation"
    )
    facts: tuple[_Text, ...] = Field(
        default=(), description="known facts: their retention in TaskState is measured"
    )
    simulated_user: SimulatedUser | None = Field(
        default=None, description="a model plays the user (instead of fixed turns)"
    )
    user_script: tuple[_Text, ...] = Field(
        default=(),
        description="the simulated user's messages, the first included, when the simulator "
        "is scripted (--model scripted without --user-model)",
    )
    script: Script | None = Field(
        default=None,
        description="with a simulated user: the scripted model's replies for the whole run, "
        "by purpose, in call order",
    )
    turns: tuple[Turn, ...] = Field(default=(), validate_default=True)
    expect: Expectations = Expectations()
    scorer: RunScorer | None = Field(
        default=None,
        exclude=True,
        description="a scenario source's own scoring and columns (set in Python, never in a "
        "file: agentkit.eval.scorer)",
    )
    source_user: SourceUser | None = Field(
        default=None,
        exclude=True,
        description="a scenario source's own simulated user (set in Python, never in a file: "
        "agentkit.eval.source_user)",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    _source: Path | None = PrivateAttr(default=None)

    @field_validator("user_script")
    @classmethod
    def _user_script_needs_a_user(
        cls, lines: tuple[str, ...], info: ValidationInfo
    ) -> tuple[str, ...]:
        user = info.data.get("simulated_user")
        if lines and user is None and "simulated_user" not in _failed(info):
            raise ValueError("a user_script needs a simulated_user")
        opening = user.opening if isinstance(user, SimulatedUser) else None
        if lines and opening is not None and lines[0] != opening:
            raise ValueError(f"the first line is the opening message {opening!r}, not {lines[0]!r}")
        return lines

    @field_validator("script")
    @classmethod
    def _script_needs_a_user(cls, script: Script | None, info: ValidationInfo) -> Script | None:
        alone = info.data.get("simulated_user") is None and "simulated_user" not in _failed(info)
        if script is not None and alone:
            raise ValueError("a scenario-level script goes with a simulated_user")
        return _check_script(script)

    @field_validator("turns")
    @classmethod
    def _turns_or_a_simulated_user(
        cls, turns: tuple[Turn, ...], info: ValidationInfo
    ) -> tuple[Turn, ...]:
        simulated = info.data.get("simulated_user") is not None
        if "simulated_user" in _failed(info):
            return turns
        if turns and simulated:
            raise ValueError("a scenario has turns or a simulated_user, not both")
        if not turns and not simulated:
            raise ValueError("a scenario needs at least one turn (or a simulated_user)")
        return turns

    def __eq__(self, other: object) -> bool:
        """Equal by content, wherever each was read from."""
        if not isinstance(other, Scenario):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # holds dicts: never hashable

    @property
    def source(self) -> Path:
        """The file the scenario was read from (``<id>.yaml`` for one built in Python)."""
        return self._source or Path(f"{self.id}.yaml")

    def tool_names(self) -> Iterator[tuple[str, str]]:
        """``(field, tool name)`` for every tool the scenario names."""
        for number, turn in enumerate(self.turns):
            for index, call in enumerate(turn.before):
                yield f"turns.{number}.before.{index}.tool", call.tool
            for field, name in turn.expect.tool_names():
                yield f"turns.{number}.expect.{field}", name
        for field, name in self.expect.tool_names():
            yield f"expect.{field}", name

    def state_expectations(self) -> Iterator[tuple[str, Mapping[str, JsonValue]]]:
        """``(field, {toolset: expected})`` for every ``state`` expectation."""
        for number, turn in enumerate(self.turns):
            if turn.expect.state is not None:
                yield f"turns.{number}.expect.state", turn.expect.state
        if self.expect.state is not None:
            yield "expect.state", self.expect.state

    @property
    def scripted(self) -> bool:
        """The scenario can run under ``--model scripted``: every turn carries a script, or
        (with a simulated user) the run has a script and a ``user_script``."""
        if self.simulated_user is not None:
            return self.script is not None and bool(self.user_script)
        return all(turn.script is not None for turn in self.turns)

    def missing_scripts(self) -> list[int]:
        """1-based numbers of the turns without a script (fixed turns only)."""
        return [number for number, turn in enumerate(self.turns, 1) if turn.script is None]


def _failed(info: ValidationInfo) -> set[str]:
    """The fields before this one that did not validate (absent from ``info.data``)."""
    return {"simulated_user"} - set(info.data)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


@cache
def _unique_key_loader() -> type[Any]:
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (plain
    YAML keeps the last one silently, so a pasted block could replace a turn unnoticed)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"the key {key!r} is given twice",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_file(path: Path) -> Any:  # noqa: ANN401 - parsed YAML/JSON, validated by the caller
    """The parsed YAML or JSON of *path* (a key given twice is an error); a
    :class:`ConfigError` names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(path, "", "does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(path, "", f"cannot be read: {error}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as error:
            raise ConfigError(
                path, "", f"is not valid JSON (line {error.lineno}, column {error.colno})"
            ) from None
        except _DuplicateKeyError as error:
            raise ConfigError(
                path, "", f"is not valid JSON: the key {error.key!r} is given twice"
            ) from None
    require("eval", "a YAML scenario file", "yaml")
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None)
        detail = f": {problem}" if problem else ""
        raise ConfigError(path, "", f"is not valid YAML{where}{detail}") from None


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate one scenario file (``.yaml``, ``.yml`` or ``.json``)."""
    file = Path(path)
    if file.suffix not in SCENARIO_SUFFIXES:
        raise ConfigError(
            file, "", f"is not a scenario file (expected {', '.join(SCENARIO_SUFFIXES)})"
        )
    data = read_file(file)
    if not isinstance(data, dict):
        raise ConfigError(file, "", "must hold a mapping (v, id, agent, turns, …)")
    data.setdefault("id", file.stem)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        more = error.error_count() - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(file, where, f"{problem}{suffix}") from None
    scenario._source = file
    return scenario


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        # A folder means the scenario files directly in it: sub-folders hold other kinds of
        # file (data/scenarios/compression/ holds compression-lab dialogues).
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SCENARIO_SUFFIXES)
    if path.exists():
        return [path]
    raise UsageError(f"no scenario file or folder at {path}")


def load_scenarios(
    paths: Path | str | Sequence[Path | str], *, tags: Iterable[str] = ()
) -> list[Scenario]:
    """Every scenario in *paths* (files, or folders: the scenario files directly in them),
    in the order given (a folder's files by name). With *tags*, only the scenarios carrying
    at least one of them. Two scenarios with the same id are a :class:`UsageError`."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise UsageError("no scenario files given")
    wanted = set(tags)
    scenarios: list[Scenario] = []
    seen: dict[str, Path] = {}
    for item in items:
        files = _files(Path(item))
        if not files:
            raise UsageError(f"no scenario files ({', '.join(SCENARIO_SUFFIXES)}) in {item}")
        for file in files:
            scenario = load_scenario(file)
            if scenario.id in seen:
                raise UsageError(
                    f"scenario id {scenario.id!r} is used by both {seen[scenario.id]} and {file}"
                )
            seen[scenario.id] = file
            if not wanted or wanted & set(scenario.tags):
                scenarios.append(scenario)
    if not scenarios:
        raise UsageError(f"no scenario carries any of the tags {sorted(wanted)}")
    return scenarios


def check_against_tools(scenario: Scenario, tools: AgentTools) -> None:
    """Check what *scenario* names against the agent's loaded *tools*: every tool name, the
    toolsets of its ``state`` (seeded ones validated by the toolset's ``state_model``) and of
    its ``state`` expectations. A problem is a :class:`ConfigError` naming the file and field.
    """
    file = scenario.source
    known = tools.registry.names()
    for field, name in scenario.tool_names():
        if name not in known:
            listed = ", ".join(known) or "(none)"
            raise ConfigError(file, field, f"unknown tool {name!r} (the agent's tools: {listed})")
    toolsets = {toolset.name: toolset for toolset in tools.toolsets}
    stateful = sorted(name for name, toolset in toolsets.items() if toolset.has_state)
    for name, value in scenario.state.items():
        toolset = toolsets.get(name)
        if toolset is None:
            raise ConfigError(file, f"state.{name}", f"the agent has no toolset {name!r}")
        if toolset.state_model is not None:
            try:
                toolset.state_model.model_validate(value)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(["state", name, *(str(part) for part in first["loc"])])
                problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
                raise ConfigError(file, where, problem) from None
    for field, expected in scenario.state_expectations():
        for name in expected:
            if name not in stateful:
                listed = ", ".join(stateful) or "(none)"
                raise ConfigError(
                    file,
                    f"{field}.{name}",
                    f"no toolset {name!r} with a state (stateful: {listed})",
                )
