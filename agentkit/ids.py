"""Identifiers: validation before any path is built, and generation of new ones.

Every agent, conversation and message id becomes a directory name, so an id is accepted only
when it *fully* matches ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}`` in ASCII: no dots (so no ``..`` and
no hidden names), no separators, no whitespace or control characters, nothing that looks like a
command-line option. ``re.fullmatch`` is used on purpose: ``re.match(r"^…$")`` accepts a
trailing newline, and ``\\w`` matches non-ASCII letters.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Literal

from agentkit.errors import InvalidIdError

__all__ = [
    "ID_PATTERN",
    "IdKind",
    "check_id",
    "is_valid_id",
    "new_conversation_id",
    "new_message_id",
]

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
_ID_RE = re.compile(ID_PATTERN, re.ASCII)
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

IdKind = Literal["agent", "conversation", "message", "approval"]


def is_valid_id(value: object) -> bool:
    """True when *value* is a string that fully matches :data:`ID_PATTERN`."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def check_id(value: object, kind: IdKind) -> str:
    """Return *value* unchanged when it is a valid id, else raise :class:`InvalidIdError`."""
    if not is_valid_id(value):
        raise InvalidIdError(kind, value)
    assert isinstance(value, str)
    return value


def _base36(number: int) -> str:
    digits = []
    while number:
        number, rem = divmod(number, 36)
        digits.append(_ALPHABET[rem])
    return "".join(reversed(digits)) or "0"


def _new_id(prefix: str) -> str:
    # Millisecond time first, so ids sort roughly by creation; then 51 random bits as ten
    # base-36 digits (2**51 < 36**10), one call to the system's random source
    stamp = _base36(time.time_ns() // 1_000_000)
    tail = _base36(secrets.randbits(51)).rjust(10, "0")
    return f"{prefix}-{stamp}{tail}"


def new_conversation_id() -> str:
    """A fresh ``conv-…`` id (time-ordered, random tail)."""
    return _new_id("conv")


def new_message_id() -> str:
    """A fresh ``msg-…`` id. A user message and the reply to it share one message id (a turn)."""
    return _new_id("msg")
