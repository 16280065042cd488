"""What a new session is told about an existing conversation (scenario C).

No model call: a compact transcript of the last ≤ 20 history messages, each cut to a bound, so
restoring context is instant, deterministic and costs a bounded number of tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkit.types import Message

__all__ = ["HISTORY_LIMIT", "MESSAGE_CHARS", "summarize_history"]

HISTORY_LIMIT = 20
MESSAGE_CHARS = 400


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def summarize_history(
    messages: Sequence[Message],
    *,
    limit: int = HISTORY_LIMIT,
    max_chars: int = MESSAGE_CHARS,
    closing: bool = True,
) -> str:
    """A transcript of the last *limit* messages, each at most *max_chars* characters.

    With *closing* (the summary goes in front of the new message) a last line says where the
    earlier conversation ends; without it (the summary goes into the system prompt) there is
    no framing line for a small model to echo back."""
    recent = list(messages)[-limit:] if limit else []
    lines = [f"[Earlier in this conversation: the last {len(recent)} messages]"]
    lines += [f"{message.role}: {_clip(message.content, max_chars)}" for message in recent]
    if closing:
        lines.append("[End of the earlier conversation. The new message follows.]")
    return "\n".join(lines)
