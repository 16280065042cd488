"""Sessions: the pool of live model sessions, the running turns, and how a turn's prompt is
built (seed 16.2-16.3)."""

from agentkit.sessions.context import summarize_history
from agentkit.sessions.pool import PoolEntry, SessionPool
from agentkit.sessions.transcript import TranscriptSession
from agentkit.sessions.turns import RunningTurn, TurnRegistry

__all__ = [
    "PoolEntry",
    "RunningTurn",
    "SessionPool",
    "TranscriptSession",
    "TurnRegistry",
    "summarize_history",
]
