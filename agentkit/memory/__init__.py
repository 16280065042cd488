"""Conversation memory (seed 002): the chat window, TaskState, ExecutionState, compression.

Three layers with different jobs: :class:`ChatHistory` holds the recent raw messages in memory
(rebuilt from the store's history on restore; :func:`chat_window` says which they are);
:class:`TaskState` holds durable, summarised context; :class:`ExecutionState` holds where the
current workflow stands. The two states are
persisted by :class:`MemoryRepository` with compare-and-swap; :func:`maybe_compress` folds old
messages into TaskState.
"""

from __future__ import annotations

from agentkit.memory.compression import (
    CompressionOutcome,
    build_summarize_messages,
    maybe_compress,
    should_compress,
    update_task_state,
)
from agentkit.memory.execution_state import (
    ApprovalDecision,
    DecisionSource,
    ExecutionState,
    ExecutionStatus,
    Observation,
    PendingApproval,
    PlanStep,
    StepStatus,
    StepType,
    Waiting,
)
from agentkit.memory.history import ChatHistory, chat_window, kept_from, tool_safe_cut
from agentkit.memory.repository import CorruptStateError, MemoryRepository, Versioned
from agentkit.memory.task_state import (
    DecisionMemory,
    DecisionSummary,
    TaskState,
    TaskStateSummary,
    is_allowed_open_loop,
    looks_secret,
    summary_schema,
)
from agentkit.memory.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenEstimator,
    estimate_messages,
    estimate_tokens,
    estimator_for,
)

__all__ = [
    "ApprovalDecision",
    "DecisionSource",
    "PendingApproval",
    "MESSAGE_OVERHEAD_TOKENS",
    "ChatHistory",
    "CompressionOutcome",
    "CorruptStateError",
    "DecisionMemory",
    "DecisionSummary",
    "ExecutionState",
    "ExecutionStatus",
    "MemoryRepository",
    "Observation",
    "PlanStep",
    "StepStatus",
    "StepType",
    "TaskState",
    "TaskStateSummary",
    "TokenEstimator",
    "Versioned",
    "Waiting",
    "build_summarize_messages",
    "chat_window",
    "kept_from",
    "estimate_messages",
    "estimate_tokens",
    "estimator_for",
    "is_allowed_open_loop",
    "looks_secret",
    "maybe_compress",
    "update_task_state",
    "should_compress",
    "summary_schema",
    "tool_safe_cut",
]
