"""Likelihood scoring in the embedded model's worker: how likely is a text after a prompt?

Used by :mod:`agentkit.models._llama_worker` for its ``score`` op (never imported by the
parent, which has no llama_cpp loaded). Scoring generates nothing: the model reads a prompt
and a continuation in one pass and the log-probability of each of the continuation's tokens
is read off its output distributions. Nothing can come out malformed, and every pair gets a
graded score instead of one sampled winner.

Costs, on the worker's single context: a prompt is evaluated only past the longest prefix the
context already holds (the previous pair's, or a generation's), so pairs that start alike
share that start; the rest of a prompt and its continuation are one batched decode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Scored", "score_pairs"]


@dataclass(frozen=True)
class Scored:
    """Per pair, the log-probability of each continuation token; and the tokens evaluated."""

    logprobs: list[list[float]]
    prompt_tokens: list[int]
    evaluated_tokens: int


def _log_softmax(llama: Any, index: int) -> Any:  # noqa: ANN401 - Llama in, numpy out
    """The log-probabilities of the next token after the last decode's *index*-th output."""
    import llama_cpp
    import numpy as np

    pointer = llama_cpp.llama_get_logits_ith(llama.ctx, index)
    logits = np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).astype(np.float64)
    top = float(logits.max())
    return logits - (top + math.log(float(np.exp(logits - top).sum())))


def _common(held: list[int], tokens: list[int]) -> int:
    count = 0
    for left, right in zip(held, tokens, strict=False):
        if left != right:
            break
        count += 1
    return count


def _decode(llama: Any, tokens: list[int], *, all_logits: bool) -> None:  # noqa: ANN401
    """Decode *tokens* after the context's ``n_tokens``, logits for every position when
    *all_logits* (``Llama.eval`` keeps only the last, and only with ``logits_all``, which
    would hold a vocabulary-wide row for every context position)."""
    start = llama.n_tokens
    llama._ctx.kv_cache_seq_rm(-1, start, -1)  # llama_cpp has no public batch API
    batch = llama._batch
    batch.set_batch(batch=tokens, n_past=start, logits_all=all_logits)
    llama._ctx.decode(batch)
    llama.input_ids[start : start + len(tokens)] = tokens
    llama.n_tokens = start + len(tokens)


def score_pairs(
    llama: Any,  # noqa: ANN401 - llama_cpp.Llama
    pairs: list[tuple[str, str]],
) -> Scored:
    """For each ``(prompt, continuation)``: the log-probability of each continuation token
    after the prompt. Prompts are raw text (special tokens in them are read as such)."""
    limit = min(llama.n_ctx(), llama.n_batch) - 1
    evaluated = 0
    scored: list[list[float]] = []
    counts: list[int] = []
    for prompt, continuation in pairs:
        base = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        tail = llama.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
        if not base or not tail:
            raise ValueError("a prompt and its continuation must both have tokens")
        if len(base) + len(tail) > limit:
            raise ValueError(f"{len(base)} + {len(tail)} tokens do not fit in {limit}")
        held = [int(token) for token in llama.input_ids[: llama.n_tokens]]
        # keep the shared prefix; the prompt's last token is decoded again for its logits
        keep = min(_common(held, base), len(base) - 1)
        llama.n_tokens = keep
        fresh = [*base[keep:], *tail[:-1]]
        _decode(llama, fresh, all_logits=True)
        evaluated += len(fresh)
        first = len(base) - keep - 1  # the output that predicts the continuation's first token
        logprobs = [
            round(float(_log_softmax(llama, first + index)[token]), 4)
            for index, token in enumerate(tail)
        ]
        scored.append(logprobs)
        counts.append(len(base))
    llama._requires_eval = True  # a generation re-decodes before sampling
    return Scored(logprobs=scored, prompt_tokens=counts, evaluated_tokens=evaluated)
