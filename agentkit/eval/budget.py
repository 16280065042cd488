"""Budgets: a hard stop for one run (tokens, model calls, seconds, dollars) and for a whole
sweep.

A run's :class:`RunBudget` is spent by every model call the run makes — the agent's and the
simulated user's. It is checked at two kinds of safe point, so that a run over budget never
leaves anything half-written:

* **between turns**: once the budget is spent, no further user message is sent;
* **inside a turn**: the agent's model is wrapped in a :class:`BudgetedModel`; a call that
  would start once the budget is spent asks the turn to stop (``Agent.cancel``: the planner
  stops at its next safe point, a running tool finishes first) and is never sent; at the
  ``max_seconds`` deadline the running turn is cancelled the same way. The turn ends with
  status ``cancelled``, its conversation stays on disk as any cancelled turn does.

A money budget (``max_cost``, ``--max-cost USD``) is spent by the agent's own model calls,
priced as the row's ``cost_usd`` is (:mod:`agentkit.eval.pricing`: the model's list price
today, cached input tokens at their price); like the token budget it is checked after each
call. A sweep with a money budget on a model genai-prices does not price is refused before
any run.

A run stopped so has ``outcome`` ``budget`` and the reason in ``budget_reason``
(``max_tokens: 1043 tokens spent, the limit is 1000``). A token budget is checked after each
call, so the call that crosses it completes: the run spends at most one call more than the
limit.

:class:`SweepBudget` is the sweep's token budget: no new run starts once the runs that finished
have spent it (runs already going finish); the runs that never started are rows with
``outcome`` ``not_started``, and ``--resume`` runs them later.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from agentkit.errors import ModelError, UsageError
from agentkit.models.base import ChatModel, Completion, ModelEvent, ModelRequest, WrapperModel
from agentkit.types import Usage

__all__ = ["BudgetedModel", "Meter", "RunBudget", "SweepBudget"]

#: how long a call over budget waits for the turn's cancel to interrupt it; a call outside a
#: cancellable stage (memory upkeep after the answer) fails with a ModelError after it
_CANCEL_GRACE = 0.5


@dataclass(frozen=True, slots=True)
class RunBudget:
    """What one run may spend (None: no limit). Plain values, so a task can be pickled."""

    max_tokens: int | None = None
    max_model_calls: int | None = None
    max_seconds: float | None = None
    #: US dollars the agent's model calls may cost
    max_cost: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_model_calls", "max_seconds", "max_cost"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                option = "--" + name.replace("_", "-")
                raise UsageError(f"{option} must be positive, got {value}")

    @property
    def is_empty(self) -> bool:
        return self == RunBudget()


class Meter:
    """What one run has spent so far, against its budget (one per run, on the run's loop)."""

    def __init__(self, budget: RunBudget) -> None:
        self.budget = budget
        self.started = time.monotonic()
        self.calls = 0
        self.tokens = 0
        #: what the agent's own model calls cost so far (US dollars; priced when they are
        #: metered with their model's spec)
        self.cost = 0.0
        self._priced = Usage()
        self._priced_spec = ""
        #: why the run went over budget ("" while it has not)
        self.reason = ""
        self._stop: Callable[[], Awaitable[object]] | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining_seconds(self) -> float | None:
        limit = self.budget.max_seconds
        return None if limit is None else max(0.0, limit - self.elapsed())

    def exceeded(self) -> str:
        """Why the budget is spent now, or "" (not yet)."""
        budget = self.budget
        if budget.max_model_calls is not None and self.calls >= budget.max_model_calls:
            return (
                f"max_model_calls: {self.calls} model calls made, "
                f"the limit is {budget.max_model_calls}"
            )
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"max_tokens: {self.tokens} tokens spent, the limit is {budget.max_tokens}"
        if budget.max_cost is not None and self.cost >= budget.max_cost:
            return f"max_cost: ${self.cost:.6f} spent, the limit is ${budget.max_cost:g}"
        if budget.max_seconds is not None and self.elapsed() >= budget.max_seconds:
            elapsed = self.elapsed()
            return f"max_seconds: {elapsed:.1f} s elapsed, the limit is {budget.max_seconds:g} s"
        return ""

    def over(self) -> str:
        """:meth:`exceeded`, remembered as the run's reason the first time it is set."""
        reason = self.exceeded()
        if reason and not self.reason:
            self.reason = reason
        return self.reason or reason

    def spend(self, usage: Usage, calls: int = 0, *, spec: str = "") -> None:
        """Count *usage* (and *calls*); *spec*: the agent model's, whose price it costs."""
        self.tokens += usage.input_tokens + usage.output_tokens
        self.calls += calls
        if spec and self.budget.max_cost is not None:
            from agentkit.eval.pricing import price_usage

            self._priced += usage
            self._priced_spec = spec
            priced = price_usage(spec, self._priced).cost_usd
            self.cost = priced if priced is not None else self.cost

    def arm(self, stop: Callable[[], Awaitable[object]] | None) -> None:
        """What stops the running turn (``agent.cancel(conversation)``); None between turns."""
        self._stop = stop

    async def stop_turn(self, reason: str) -> None:
        """The budget is spent (*reason*): stop the running turn at its next safe point."""
        if not self.reason:
            self.reason = reason
        if self._stop is not None:
            await self._stop()

    async def before_call(self, spec: str) -> None:
        """Count one model call about to start; over budget, stop the turn instead."""
        reason = self.over()
        if not reason:
            self.calls += 1
            return
        await self.stop_turn(reason)
        await asyncio.sleep(_CANCEL_GRACE)  # the turn's cancel interrupts this very call here
        raise ModelError(spec, f"over the run's budget ({reason})")


class BudgetedModel(WrapperModel):
    """*inner* behind a :class:`Meter`: every call is counted, and none starts over budget.

    Scoring, embeddings and token counts are *inner*'s, not metered (:class:`WrapperModel`)."""

    def __init__(self, inner: ChatModel, meter: Meter) -> None:
        super().__init__(inner)
        self.meter = meter

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await self.meter.before_call(self.spec)
        async for event in self.inner.request(request):
            if isinstance(event, Completion):
                self.meter.spend(event.usage, spec=self.spec)
            yield event


class SweepBudget:
    """The sweep's token budget: spent by the rows that finished (None: no limit)."""

    def __init__(self, max_tokens: int | None) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise UsageError(f"--sweep-max-tokens must be positive, got {max_tokens}")
        self.max_tokens = max_tokens
        self.spent = 0

    def record(self, tokens: int) -> None:
        """A run that finished spent *tokens* (the agent's and its simulated user's)."""
        self.spent += tokens

    @property
    def is_spent(self) -> bool:
        return self.max_tokens is not None and self.spent >= self.max_tokens

    def reason(self) -> str:
        return f"sweep_max_tokens: {self.spent} tokens spent, the limit is {self.max_tokens}"
