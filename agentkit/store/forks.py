"""Forks and turn checkpoints in the conversation stores.

A fork is a new conversation whose journal is the source journal's prefix up to and including
the checkpoint of one turn (re-numbered, after its own ``created`` and ``forked`` records),
ending with that turn's status. So the fork's history is the source's prefix, byte for byte
in ``history.json``, and its checkpoints are the source's (a fork can be forked again).

Why it is built this way:

* The source is only read, under its writer lock taken without waiting (a turn running there
  is a :class:`~agentkit.errors.ConversationBusyError`, nothing is written).
* The fork is created whole by the backend, with the traces of the turns it copies
  (:meth:`JournalBackend.create <agentkit.store.backend.JournalBackend.create>`: the file
  store builds it in a temp folder ``.{id}.creating-…`` renamed into place, PostgreSQL in one
  transaction), so a crash leaves it complete or absent. ``prepare`` runs last before it is
  visible (the Agent restores the fork's memory there), so a visible fork always has its
  memory. :meth:`ConversationStore.fork <agentkit.store.conversation_store.ConversationStore.fork>`
  does this once for every backend.
* Every bad request is found before anything is written: an unknown turn is
  :class:`~agentkit.errors.TurnNotFoundError`, a turn without a checkpoint (still running, or
  cut short) :class:`~agentkit.errors.TurnNotFinishedError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkit.errors import StoreError, TurnNotFinishedError, TurnNotFoundError, UsageError
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._records import (
    CheckpointRecord,
    CreatedRecord,
    ForkedRecord,
    JournalRecord,
    MessageRecord,
    StatusRecord,
)
from agentkit.store.values import ConversationKey, Prepare
from agentkit.types import ForkOrigin, utc_now

__all__ = ["FORK_START", "Prepare", "checkpoints_of", "fork_records"]

#: ``at`` for a fork taken before the first turn (an empty conversation with no memory)
FORK_START = ""


def checkpoints_of(records: Sequence[JournalRecord]) -> list[TurnCheckpoint]:
    return [r.checkpoint for r in records if isinstance(r, CheckpointRecord)]


def _cut(records: Sequence[JournalRecord], key: ConversationKey, at: str | None) -> int:
    """The index of the checkpoint record the fork ends at (0: before the first turn)."""
    if at == FORK_START:
        return 0
    marks = [
        (index, record.checkpoint.message_id)
        for index, record in enumerate(records)
        if isinstance(record, CheckpointRecord)
    ]
    turns = [r.message.message_id for r in records if isinstance(r, MessageRecord)]
    if at is None:
        if marks:
            return marks[-1][0]
        if not turns:
            return 0
        at = turns[-1]
    found = [index for index, message_id in marks if message_id == at]
    if found:
        return found[-1]
    if at in turns:
        why = (
            "it has no checkpoint: it is still running, or it was cut short (or recorded "
            "before checkpoints existed) before it finished"
        )
        raise TurnNotFinishedError(key.agent_id, key.conversation_id, at, why)
    raise TurnNotFoundError(key.agent_id, key.conversation_id, at)


def fork_records(
    records: Sequence[JournalRecord],
    source: ConversationKey,
    target: ConversationKey,
    *,
    title: str,
    at: str | None,
) -> tuple[list[JournalRecord], TurnCheckpoint | None]:
    """The journal of a fork of *source* (its *records*) at turn *at* (None: the last
    finished turn; :data:`FORK_START`: before the first), and the checkpoint it ends at."""
    if source.agent_id != target.agent_id:
        raise UsageError("a fork belongs to the agent of its source")
    cut = _cut(records, source, at)
    checkpoint = None
    if cut:
        mark = records[cut]
        assert isinstance(mark, CheckpointRecord)
        checkpoint = mark.checkpoint
    now = utc_now()
    origin = ForkOrigin(
        conversation_id=source.conversation_id,
        message_id=checkpoint.message_id if checkpoint else None,
    )
    kept = [
        record
        for record in records[1 : cut + 1]
        if not isinstance(record, CreatedRecord | StatusRecord | ForkedRecord)
    ]
    messages = sum(isinstance(record, MessageRecord) for record in kept)
    if checkpoint is not None and messages != checkpoint.messages:
        raise StoreError(
            f"the checkpoint of turn {checkpoint.message_id} in {source} counts "
            f"{checkpoint.messages} messages, the journal {messages}"
        )
    result: list[JournalRecord] = [
        CreatedRecord(
            seq=1,
            conversation_id=target.conversation_id,
            agent_id=target.agent_id,
            title=title,
            at=now,
        ),
        ForkedRecord(seq=2, origin=origin),
    ]
    result += [record.model_copy(update={"seq": seq}) for seq, record in enumerate(kept, 3)]
    status = checkpoint.status if checkpoint else "idle"
    result.append(StatusRecord(seq=len(result) + 1, status=status, at=now))
    return result, checkpoint
