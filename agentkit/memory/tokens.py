"""Token estimates for the compression thresholds; the estimator is pluggable.

A :data:`TokenEstimator` maps a text to a token count. When the model has its own tokenizer
(:attr:`~agentkit.models.base.ChatModel.own_tokenizer`, e.g. LlamaModel) that is used;
otherwise :func:`estimate_tokens`, a CJK-aware estimate: one token per CJK character
(ideographs, kana, hangul, full-width forms), about four characters per token for other text.
A message also costs :data:`MESSAGE_OVERHEAD_TOKENS` for its role and framing
(:func:`estimate_messages`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from agentkit.language import is_cjk
from agentkit.models.base import ChatModel
from agentkit.types import Message

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenEstimator",
    "estimate_messages",
    "estimate_tokens",
    "estimator_for",
    "is_cjk",
    "message_text",
]

TokenEstimator = Callable[[str], int]
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """CJK characters count one token each; the rest about four characters per token."""
    cjk = sum(1 for char in text if is_cjk(char))
    other = len(text) - cjk
    return cjk + (other + 3) // 4


def estimator_for(model: object) -> TokenEstimator:
    """The model's own tokenizer when it has one (``own_tokenizer``), else the estimate."""
    if isinstance(model, ChatModel) and model.own_tokenizer:
        count = model.count_prompt_tokens
        return lambda text: count([text])[0]
    return estimate_tokens


def message_text(message: Message) -> str:
    """What of *message* reaches the model: its content and any tool calls it made."""
    if not message.tool_calls:
        return message.content
    calls = " ".join(
        f"{call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"
        for call in message.tool_calls
    )
    return f"{message.content} {calls}".strip()


def estimate_messages(messages: Iterable[Message], estimate: TokenEstimator) -> int:
    """Tokens of a window: each message's text plus :data:`MESSAGE_OVERHEAD_TOKENS`."""
    return sum(estimate(message_text(message)) + MESSAGE_OVERHEAD_TOKENS for message in messages)
