"""Threshold sweeps: run compression over a grid of strategy / N / T / K and measure what
survives.

A sweep takes one chat window (a conversation's, or a scenario file's), a starting TaskState,
a model and a :class:`ThresholdGrid`, and runs :func:`~agentkit.memory.compression.maybe_compress`
at every grid point, recording tokens before/after, which known facts are still carried
(:mod:`agentkit.memory.fidelity`) and how many model-written facts grounding dropped
(``facts_ungrounded``, :mod:`agentkit.memory.grounding`). It is the engine of the
compression lab and the threshold notebooks, and free of any notebook library.

Invariants:

* every grid point yields exactly one :class:`SweepRow`, in grid order, whatever the model does:
  a failed summary is a row with ``status="failed"`` and the error, and the sweep goes on;
* the model sees exactly what a planner turn would send it (the same function builds the
  request), and it is asked once per distinct strategy and cut: N and T only decide *whether*
  to compress, K decides *what* is summarised, so points with the same strategy and cut share
  one summary (``reused``); ``extractive`` never calls the model;
* nothing is persisted: the window and the starting state are never changed;
* every summary is one model call through the model-call tracer
  (:class:`~agentkit.calls.tracer.CallTracer`): its
  :class:`~agentkit.calls.records.CallRecord` is the row's ``call`` (the rows sharing the
  summary share it), its ``chat {model}`` span a child of an ``update_memory`` span under the
  sweep's ``invoke_agent compression_sweep`` span.

Scenario files (:class:`CompressionScenario`) are a trust boundary and are validated strictly;
:func:`load_scenario` names the offending field.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer
from agentkit.config import CompressionConfig, CompressionStrategy
from agentkit.errors import ConfigError, UsageError
from agentkit.memory.compression import CompressionOutcome, maybe_compress, should_compress
from agentkit.memory.fidelity import fact_retention, facts_in_messages
from agentkit.memory.history import tool_safe_cut
from agentkit.memory.strategies import STRATEGIES
from agentkit.memory.task_state import TaskState
from agentkit.memory.tokens import TokenEstimator, estimate_messages, estimator_for
from agentkit.models.base import ChatModel
from agentkit.planning.upkeep import summarizer
from agentkit.telemetry import Telemetry
from agentkit.types import Message, utc_now

__all__ = [
    "CompressionScenario",
    "ScenarioMessage",
    "SweepRow",
    "SweepStatus",
    "ThresholdGrid",
    "load_scenario",
    "sweep_compression",
]

SweepStatus = Literal["compressed", "under_threshold", "nothing_to_cut", "failed"]
#: the agent name on a sweep's ``invoke_agent`` span
SWEEP_AGENT = "compression_sweep"
_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScenarioMessage(_Strict):
    """One message of a scenario: who spoke and what was said."""

    role: Literal["user", "assistant", "tool"]
    content: _Text


class CompressionScenario(_Strict):
    """A scenario file: a dialogue and the facts a good summary must keep.

    ``pinned_facts`` start the TaskState (they survive any compression, so they measure the
    pinning invariant, not the model); ``facts`` are what the sweep looks for afterwards.
    """

    v: Literal[1] = 1
    title: str = ""
    language: str = ""
    facts: tuple[_Text, ...] = ()
    pinned_facts: tuple[_Text, ...] = ()
    messages: tuple[ScenarioMessage, ...] = Field(min_length=1)

    def window(self) -> list[Message]:
        """The dialogue as chat-window messages (an assistant or tool message joins the turn
        of the user message before it)."""
        window: list[Message] = []
        turn = ""
        for item in self.messages:
            if item.role == "user" or not turn:
                opened = Message.user(item.content)
                turn = opened.message_id
                if item.role == "user":
                    window.append(opened)
                    continue
            window.append(
                Message(role=item.role, content=item.content, message_id=turn, timestamp=utc_now())
            )
        return window

    def task_state(self) -> TaskState:
        """The starting TaskState: empty but for the pinned facts."""
        return TaskState(pinned_facts=self.pinned_facts).normalize()


def load_scenario(path: Path | str) -> CompressionScenario:
    """Read and validate a scenario file; a bad one is a :class:`ConfigError` naming the
    field (``messages.3.role``) and the problem."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(file, "", "does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(file, "", f"cannot be read: {error}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(
            file, "", f"is not valid JSON (line {error.lineno}, column {error.colno})"
        ) from None
    try:
        return CompressionScenario.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ConfigError(file, where, problem) from None


def _axis(name: str, values: Iterable[int], minimum: int) -> tuple[int, ...]:
    axis = tuple(dict.fromkeys(values))  # de-duplicated, order kept
    if not axis:
        raise UsageError(f"the grid's {name} has no values: give at least one")
    for value in axis:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise UsageError(f"the grid's {name} values must be integers >= {minimum}: {value!r}")
    return axis


def _strategy_axis(values: Iterable[str]) -> tuple[CompressionStrategy, ...]:
    axis: list[CompressionStrategy] = []
    for value in dict.fromkeys(values):
        known = next((name for name in STRATEGIES if name == value), None)
        if known is None:
            names = ", ".join(STRATEGIES)
            raise UsageError(f"the grid's strategy values are {names}, not {value!r}")
        axis.append(known)
    if not axis:
        raise UsageError("the grid's strategy has no values: give at least one")
    return tuple(axis)


@dataclass(frozen=True, slots=True)
class ThresholdGrid:
    """The strategies, N (``max_messages``), T (``token_threshold``) and K (``keep_recent``)
    values to try; the sweep runs their product, the strategy varying slowest, then N.
    Duplicates are dropped. The other compression keys come from *base* (``max_facts``…)."""

    max_messages: tuple[int, ...]
    token_threshold: tuple[int, ...]
    keep_recent: tuple[int, ...]
    strategy: tuple[CompressionStrategy, ...]
    base: CompressionConfig

    def __init__(
        self,
        max_messages: Iterable[int],
        token_threshold: Iterable[int],
        keep_recent: Iterable[int],
        strategy: Iterable[str] = ("model",),
        *,
        base: CompressionConfig | None = None,
    ) -> None:
        object.__setattr__(self, "max_messages", _axis("max_messages (N)", max_messages, 1))
        object.__setattr__(
            self, "token_threshold", _axis("token_threshold (T)", token_threshold, 1)
        )
        object.__setattr__(self, "keep_recent", _axis("keep_recent (K)", keep_recent, 0))
        object.__setattr__(self, "strategy", _strategy_axis(strategy))
        object.__setattr__(self, "base", base or CompressionConfig())

    def configs(self) -> list[CompressionConfig]:
        return [
            self.base.model_copy(
                update={"strategy": s, "max_messages": n, "token_threshold": t, "keep_recent": k}
            )
            for s, n, t, k in itertools.product(
                self.strategy, self.max_messages, self.token_threshold, self.keep_recent
            )
        ]

    @property
    def size(self) -> int:
        return (
            len(self.strategy)
            * len(self.max_messages)
            * len(self.token_threshold)
            * len(self.keep_recent)
        )


@dataclass(frozen=True, slots=True)
class SweepRow:
    """What compression did at one grid point.

    ``facts_in_state`` counts the known facts the resulting TaskState carries;
    ``facts_in_context`` those still reaching the next prompt at all (TaskState or the kept
    window); ``lost_facts`` are the ones in neither. Without compression nothing is lost.
    ``facts_ungrounded``: model-written facts dropped by grounding (``ungrounded_facts``);
    ``state_tokens``: the TaskState block's estimated tokens (what the prompt carries instead
    of the summarised messages).
    """

    max_messages: int
    token_threshold: int
    keep_recent: int
    status: SweepStatus
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    facts_total: int
    facts_in_state: int
    facts_in_context: int
    lost_facts: tuple[str, ...] = ()
    reused: bool = False
    summary_ms: float = 0.0
    error: str = ""
    task_state: TaskState = field(default_factory=TaskState)
    strategy: str = "model"
    facts_ungrounded: int = 0
    ungrounded_facts: tuple[str, ...] = ()
    state_tokens: int = 0
    #: the summary's model call (None: no model call at this point)
    call: CallRecord | None = None

    def as_record(self) -> dict[str, Any]:
        """A flat record (for a table): everything but the TaskState, lists as text."""
        return {
            "strategy": self.strategy,
            "N": self.max_messages,
            "T": self.token_threshold,
            "K": self.keep_recent,
            "status": self.status,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "facts_total": self.facts_total,
            "facts_in_state": self.facts_in_state,
            "facts_in_context": self.facts_in_context,
            "lost_facts": "; ".join(self.lost_facts),
            "facts_ungrounded": self.facts_ungrounded,
            "ungrounded_facts": "; ".join(self.ungrounded_facts),
            "state_tokens": self.state_tokens,
            "reused": self.reused,
            "summary_ms": self.summary_ms,
            "error": self.error,
        }


Progress = Callable[[int, int], None]
#: one summary of a sweep: its outcome, how long it took (ms) and its model call's record
_Summary = tuple[CompressionOutcome | None, float, CallRecord | None]


@dataclass(frozen=True, slots=True)
class _Measure:
    """What every row of one sweep is measured against."""

    window: list[Message]
    start: TaskState
    facts: tuple[str, ...]
    estimate: TokenEstimator
    tokens_before: int

    def row(
        self,
        config: CompressionConfig,
        status: SweepStatus,
        outcome: CompressionOutcome | None = None,
        *,
        reused: bool = False,
        summary_ms: float = 0.0,
        error: str = "",
        call: CallRecord | None = None,
    ) -> SweepRow:
        compressed = outcome is not None and outcome.compressed
        state = outcome.task_state if outcome is not None and compressed else self.start
        kept = list(outcome.window) if outcome is not None and compressed else self.window
        retention = fact_retention(state, self.facts)
        in_window = set(facts_in_messages(kept, retention.lost))
        lost = tuple(fact for fact in retention.lost if fact not in in_window)
        return SweepRow(
            max_messages=config.max_messages,
            token_threshold=config.token_threshold,
            keep_recent=config.keep_recent,
            status=status,
            messages_before=len(self.window),
            messages_after=len(kept),
            tokens_before=self.tokens_before,
            tokens_after=estimate_messages(kept, self.estimate)
            if compressed
            else self.tokens_before,
            facts_total=len(self.facts),
            facts_in_state=len(retention.kept),
            facts_in_context=len(self.facts) - len(lost),
            lost_facts=lost,
            reused=reused,
            summary_ms=summary_ms,
            error=error,
            task_state=state,
            strategy=config.strategy,
            facts_ungrounded=len(outcome.ungrounded) if outcome is not None and compressed else 0,
            ungrounded_facts=outcome.ungrounded if outcome is not None and compressed else (),
            state_tokens=self.estimate(state.render()) if state.render() else 0,
            call=call,
        )


async def sweep_compression(
    window: Sequence[Message],
    task_state: TaskState,
    model: ChatModel,
    grid: ThresholdGrid,
    *,
    facts: Iterable[str] = (),
    estimate: TokenEstimator | None = None,
    progress: Progress | None = None,
    telemetry: Telemetry | None = None,
) -> list[SweepRow]:
    """Compress *window* (from *task_state*) at every point of *grid*; one row per point.

    *estimate* defaults to the model's tokenizer (:func:`estimator_for`). *progress* is called
    with ``(done, total)`` after each point. *telemetry* keeps the sweep's spans (default: a
    new one, exported through OpenTelemetry when it is set up). A model failure at a point
    becomes a ``failed`` row; an empty fact is a :class:`UsageError` before any model call.
    """
    known = tuple(facts)
    fact_retention(task_state, known)  # validates the facts up front
    estimate = estimate or estimator_for(model)
    messages = list(window)
    measure = _Measure(messages, task_state, known, estimate, estimate_messages(messages, estimate))
    configs = grid.configs()
    summaries: dict[
        tuple[str, int], tuple[CompressionOutcome | None, float, CallRecord | None]
    ] = {}
    rows: list[SweepRow] = []
    trace = (telemetry or Telemetry(agent_id=SWEEP_AGENT)).turn(
        conversation_id="", message_id="", model=model.spec
    )
    tracer = CallTracer.standalone(model, trace=trace)
    summarize = summarizer(tracer, model)
    try:
        for done, config in enumerate(configs, start=1):
            cut = tool_safe_cut(messages, len(messages) - config.keep_recent)
            if not should_compress(messages, config, estimate):
                rows.append(measure.row(config, "under_threshold"))
            elif cut == 0:
                rows.append(measure.row(config, "nothing_to_cut"))
            else:
                point = (config.strategy, cut)
                reused = point in summaries
                if not reused:
                    started = time.perf_counter()
                    made = len(tracer.records)
                    outcome = await maybe_compress(
                        messages, task_state, model, config, estimate,
                        parent=trace.root, summarize=summarize,
                    )  # fmt: skip
                    elapsed = round((time.perf_counter() - started) * 1000, 1)
                    call = tracer.records[-1] if len(tracer.records) > made else None
                    summaries[point] = (outcome, elapsed, call)
                outcome, elapsed, call = summaries[point]
                if outcome is not None and outcome.compressed:
                    row = measure.row(
                        config, "compressed", outcome, reused=reused, summary_ms=elapsed, call=call
                    )
                else:
                    error = str(outcome.error) if outcome is not None else "no summary"
                    row = measure.row(
                        config, "failed", reused=reused, summary_ms=elapsed, error=error, call=call
                    )
                rows.append(row)
            if progress is not None:
                progress(done, len(configs))
    except BaseException as error:  # the sweep's span ends whatever happens
        trace.end("failed", error_type=type(error).__qualname__, message=str(error))
        raise
    usage = tracer.usage
    trace.end(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return rows
