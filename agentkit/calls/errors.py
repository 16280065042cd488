"""How a planner turn ends early: a failure with a code, or a cancel (both become events)."""

from __future__ import annotations

from agentkit.errors import AgentkitError

__all__ = ["TurnCancelledError", "TurnFailedError"]


class TurnCancelledError(AgentkitError):
    """The turn was cancelled: it stops at the next safe point."""


class TurnFailedError(AgentkitError):
    """Ends the turn with an ``error`` event (code) and status failed."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)
