"""The conversation store's public names, where callers have always imported them from.

The store is one concrete layer (:mod:`agentkit.store.conversation_store`) over a journal
backend (:mod:`agentkit.store.backend`): files (the seed's on-disk layout, crash-safe), memory
(the reference) and PostgreSQL (the ``postgres`` extra: N replicas sharing conversations),
all passing the same contract suites (tests/test_store_contract*.py through the layer,
tests/test_journal_backend.py for the backends). The values they speak in live in
:mod:`agentkit.store.values`. Everything above the store (the Agent, the HTTP API, the
workbench) talks to :class:`ConversationStore` only.
"""

from __future__ import annotations

from agentkit.store.conversation_store import ConversationStore
from agentkit.store.values import (
    CallRecordSink,
    ConversationKey,
    Prepare,
    Problem,
    ProblemKind,
    StaleWriterError,
    StoreUnavailableError,
    VerifyReport,
    checked_journal,
)

__all__ = [
    "ConversationKey",
    "ConversationStore",
    "Prepare",
    "Problem",
    "ProblemKind",
    "StaleWriterError",
    "StoreUnavailableError",
    "CallRecordSink",
    "VerifyReport",
    "checked_journal",
]
