"""What a planner strategy is: :class:`~agentkit.planning.graph.Strategy` (one interface,
with the turn's graph it composes; re-exported here for strategy modules)."""

from __future__ import annotations

from agentkit.planning.graph import Strategy

__all__ = ["Strategy"]
