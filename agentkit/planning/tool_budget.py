"""Fitting the planner's tool listing to the model's context window, however many tools.

Every planner prompt that lists tools (plan, replan, next_step, act) shows the turn's
``ctx.tools``. An agent with many tools — an editor's MCP servers add 17 at once — can make
that listing alone larger than a small model's window: the embedded model (``n_ctx`` 4096)
then failed every turn with the backend's "Requested tokens (4756) exceed context window".
At intake, :func:`fit_tools` decides which tools this turn offers:

1. The budget: the model's :attr:`~agentkit.models.base.ChatModel.context_window`, less the
   reply it may write (``output_reserve``), less the plan prompt without its tool listing
   (template, system prompt, TaskState, conversation lines, the request), less a margin for
   what later prompts of the turn add (observations, the previous flow: an eighth of the
   window, at least 128 tokens). Tokens are counted by the model when it can
   (llama: its own tokenizer), else estimated (three characters a token).
2. If every tool's entry fits, all are offered: nothing changes.
3. Else the tools that must stay come first — those of a flow in progress (its steps name
   them: a paused or running plan goes on with its own tools) and the live-state reads the
   planner refreshes before planning — then the tools the router's ranking matches to the
   request (:func:`agentkit.planning.tool_ranking.rank_tools`, score above zero), best first,
   each added while it still fits. Tools that match nothing are left out once the listing
   had to be cut: a small model plans worse with a window full of unrelated tools (measured:
   the embedded model wrote an unterminated plan with the budget filled, a valid one without
   the unmatched tools). Only when nothing matches at all does the registry's order fill it.
4. When not even the prompt and the tools that must stay fit, the turn fails before any
   model call with an ``error`` event of code ``context_overflow`` that says by how much.

A turn that leaves tools out says so in its trace: a ``route`` record in ``calls.jsonl``
(``route.stage`` ``tool_budget``, with the window, the budget, the tools offered and left
out) and a ``[TOOLS]`` block in ``messages.log``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentkit.models.base import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_OUTPUT_RESERVE,
    ChatModel,
    SessionBackend,
    estimate_prompt_tokens,
)
from agentkit.planning.tool_ranking import rank_tools
from agentkit.tools import ToolRegistry

__all__ = ["ToolFit", "counts_locally", "fit_tools", "margin_tokens"]


@dataclass(frozen=True)
class ToolFit:
    """What :func:`fit_tools` decided for one turn."""

    #: the registry the turn's prompts show (the whole one when everything fits)
    tools: ToolRegistry
    window: int
    #: tokens left for the tool listing once the rest of the prompt and the reply are counted
    budget: int
    #: tokens of the whole listing, and of the listing offered
    listing_tokens: int
    offered_tokens: int
    left_out: tuple[str, ...] = ()
    #: set when the request cannot fit even with only the tools that must stay
    overflow: str = ""
    kept: tuple[str, ...] = field(default=())

    @property
    def narrowed(self) -> bool:
        return bool(self.left_out)

    def trace(self) -> dict[str, Any]:
        """The ``route`` value of the turn's ``tool_budget`` record."""
        return {
            "stage": "tool_budget",
            "window": self.window,
            "budget": self.budget,
            "listing_tokens": self.listing_tokens,
            "offered_tokens": self.offered_tokens,
            "offered": list(self.tools.names()),
            "left_out": list(self.left_out),
            "kept": list(self.kept),
            "overflow": self.overflow,
        }

    def note(self) -> str:
        """The ``[TOOLS]`` block of ``messages.log``."""
        if self.overflow:
            return self.overflow
        return (
            f"{len(self.left_out)} of {len(self.tools) + len(self.left_out)} tools left out to "
            f"fit the {self.window}-token window ({self.offered_tokens} of "
            f"{self.listing_tokens} listing tokens offered): {', '.join(self.left_out)}"
        )


def margin_tokens(window: int) -> int:
    """What later prompts of a turn may add beyond the plan prompt (observations…)."""
    return max(128, window // 8)


def counts_locally(model: ChatModel | SessionBackend) -> bool:
    """True when *model* counts tokens by estimate (no tokenizer of its own to ask: no I/O)."""
    return (
        not isinstance(model, ChatModel)
        or type(model).count_prompt_tokens is ChatModel.count_prompt_tokens
    )


def _counts(model: ChatModel | SessionBackend, texts: Sequence[str]) -> list[int]:
    if isinstance(model, ChatModel):
        return model.count_prompt_tokens(texts)
    return [estimate_prompt_tokens(text) for text in texts]


def fit_tools(
    model: ChatModel | SessionBackend,
    tools: ToolRegistry,
    request: str,
    prompt: str,
    keep: Iterable[str] = (),
) -> ToolFit:
    """The tools a turn offers so that *prompt* (the plan prompt without its tool listing,
    system prompt included) and the listing fit *model*'s window (see the module
    docstring). *keep*: tool names that must be offered (a flow in progress)."""
    window = int(getattr(model, "context_window", DEFAULT_CONTEXT_WINDOW))
    reserve = int(getattr(model, "output_reserve", DEFAULT_OUTPUT_RESERVE))
    names = tools.names()
    entries = tools.entries()
    counted = _counts(model, [prompt, *entries])
    fixed, sizes = counted[0], dict(zip(names, (n + 1 for n in counted[1:]), strict=True))
    budget = window - reserve - fixed - margin_tokens(window)
    listing = sum(sizes.values())
    if listing <= budget:
        return ToolFit(tools, window, budget, listing, listing)
    must = list(
        dict.fromkeys(
            [name for name in keep if name in tools]
            + [tool.name for tool in tools.live_state_tools()]
        )
    )
    needed = sum(sizes[name] for name in must)
    if needed > budget:
        over = needed - budget
        what = f"the prompt ({fixed} tokens)"
        if must:
            what += f" and the tools it must offer ({', '.join(must)}: {needed} tokens)"
        problem = (
            f"this request does not fit the model's context window: {what} need {over} more "
            f"tokens than the {window}-token window leaves after {reserve} for the reply"
            " (a shorter message, /clear, fewer tools, or a model with a larger window)"
        )
        return ToolFit(tools, window, budget, listing, 0, names, problem, tuple(must))
    chosen, used = list(must), needed
    ranking = [ranked for ranked in rank_tools(tools, request) if ranked.name not in must]
    matched = [ranked for ranked in ranking if ranked.score > 0]
    for ranked in matched or ranking:  # no match at all: the registry's order fills it
        if used + sizes[ranked.name] <= budget:
            chosen.append(ranked.name)
            used += sizes[ranked.name]
    picked = set(chosen)
    offered = [name for name in names if name in picked]  # the registry's order
    left_out = tuple(name for name in names if name not in picked)
    return ToolFit(tools.subset(offered), window, budget, listing, used, left_out, "", tuple(must))
