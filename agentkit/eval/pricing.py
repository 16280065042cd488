"""Cost in money: a run's tokens priced by the model's list price on the day of the run.

Prices come from pydantic's ``genai-prices`` (MIT; the price data ships inside the package, so
pricing works offline), which knows each provider's input, output and cached-input prices and
when they changed. :func:`price_usage` prices a :class:`~agentkit.types.Usage` — input tokens
(cached ones included), of which ``cached_tokens`` were read from the provider's prompt cache,
and output tokens — for a model spec:

* ``openai:MODEL`` is priced as MODEL, by its name, whichever OpenAI-compatible endpoint
  served it (genai-prices finds the provider that lists the name: ``gpt-4o-mini`` is
  OpenAI's); a name it does not list (a local vLLM or Ollama model) is not priced;
* ``claude-cli`` is priced by the model named in its arguments (``--model NAME``) when given;
* the local backends (``llama``, ``scripted``, ``function``, ``replay``, ``record`` of a local
  model) and ``acp`` agents are not priced: they cost no API money, or their price is
  not ours to know.

A usage that cannot be priced gives ``cost_usd`` None and a ``note`` saying why (the results
table's ``cost_usd`` left empty and ``cost_note``); it is never an error.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agentkit._extras import missing
from agentkit.types import Usage

if TYPE_CHECKING:
    from genai_prices.types import PriceCalculation

__all__ = ["RunCost", "model_reference", "price_usage", "require_prices"]

_INSTALL = "pip install 'agentkit[eval]' (or pip install genai-prices)"


@dataclass(frozen=True, slots=True)
class RunCost:
    """What a usage cost in US dollars (None: not priced, and ``note`` says why)."""

    cost_usd: float | None
    note: str = ""


def model_reference(spec: str) -> str | None:
    """The model name genai-prices is asked about for *spec* (None: not a priced backend)."""
    kind, _, argument = spec.strip().partition(":")
    argument = argument.strip()
    if kind == "openai":
        return argument or None
    if kind == "record":  # record:FILE:SPEC — priced as the recorded model
        _, _, inner = argument.partition(":")
        return model_reference(inner) if inner else None
    if kind == "claude-cli":
        words = shlex.split(argument.replace(":", " ")) if argument else []
        for index, word in enumerate(words[:-1]):
            if word == "--model":
                return words[index + 1]
        return None
    return None


def require_prices() -> None:
    """Check that genai-prices can be imported (``--max-cost`` needs it), naming the install."""
    try:
        import genai_prices  # noqa: F401
    except ImportError as error:
        raise missing("eval", "cost in money (--max-cost)", error, hint=_INSTALL) from error


def price_usage(spec: str, usage: Usage, when: datetime | None = None) -> RunCost:
    """What *usage* of the model *spec* cost on *when* (default: now), by genai-prices."""
    reference = model_reference(spec)
    if reference is None:
        kind = spec.partition(":")[0] or "(none)"
        return RunCost(None, f"not priced: {kind} is not a priced API model")
    if not usage.input_tokens and not usage.output_tokens:
        return RunCost(0.0)
    try:
        calculation = _calculate(reference, usage, when or datetime.now(UTC))
    except ImportError:
        return RunCost(None, f"not priced: genai-prices is not installed ({_INSTALL})")
    except LookupError:
        return RunCost(None, f"not priced: genai-prices has no price for {reference!r}")
    return RunCost(float(calculation.total_price))


def _calculate(reference: str, usage: Usage, when: datetime) -> PriceCalculation:
    from genai_prices import Usage as PricedUsage
    from genai_prices import calc_price

    cached = min(usage.cached_tokens, usage.input_tokens)
    return calc_price(
        PricedUsage(
            input_tokens=usage.input_tokens,
            cache_read_tokens=cached,
            output_tokens=usage.output_tokens,
        ),
        reference,
        genai_request_timestamp=when,
    )
