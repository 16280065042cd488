"""Sessions: the pool of live model sessions and how a turn's prompt is built (seed 16.2-16.3)."""

from agentkit.sessions.context import summarize_history
from agentkit.sessions.pool import PoolEntry, SessionPool
from agentkit.sessions.transcript import TranscriptSession

__all__ = ["PoolEntry", "SessionPool", "TranscriptSession", "summarize_history"]
