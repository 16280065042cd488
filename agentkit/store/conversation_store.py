"""The conversation store: one layer over a journal backend, the same for every backend.

Why: files, memory and PostgreSQL keep records differently, but what a conversation *is* —
records numbered 1…n whose fold is its metadata, history and turn logs — is one thing, so it
is written once, here, over :class:`~agentkit.store.backend.JournalBackend`:

* **One writer, re-entrant per turn.** :meth:`ConversationStore.hold` takes the backend's
  writer lease for a turn; every write inside it reuses it, and a write outside a turn takes
  a brief one for itself. Notes (:meth:`~ConversationStore.annotate`) made under a lease are
  not written at once: they ride along with the next commit, or are written when the lease
  is let go. The hold is the turn's — kept in its context (a ``ContextVar``), not in a
  thread — so a turn's writes can run in a store thread (:meth:`~ConversationStore.aappend`,
  :func:`~agentkit.store._offload.off_loop`: there when another turn of the process holds a
  lease too, inline when the turn is alone) and still find it, while another turn on the
  same event loop never mistakes it for its own.
* **Records are numbered and folded here**: a commit continues from the lease's metadata and
  record count (:meth:`Views.resume <agentkit.store._records.Views.resume>`), numbers its
  records, fills in a turn's checkpoint as the conversation stands after them, and hands the
  backend the records with the metadata they fold to.
* **A turn cut short is marked failed.** The status ``running`` is only ever written by a
  turn holding the lease, and every turn ends with another status before it lets go. So a
  writer that takes the lease and finds ``running`` knows the turn that wrote it died (its
  process killed, its connection lost): its next commit starts with an ``[ERROR]`` note on
  that turn and the status ``failed`` — whichever backend, whoever writes next.
* **Forks, checkpoints, turn logs, typed records and verify** are read from and written as
  records, through the backend, for every backend.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Final, ParamSpec, TypeVar, get_args

from agentkit.errors import ConversationBusyError, ConversationNotFoundError, StoreError, UsageError
from agentkit.ids import check_id
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._offload import lease_entered, lease_left, off_loop
from agentkit.store._process import pid
from agentkit.store._records import (
    LABEL_PATTERN,
    AnnotationRecord,
    CheckpointRecord,
    CreatedRecord,
    JournalRecord,
    MessageRecord,
    RecordEntry,
    StatusRecord,
    Views,
    fold,
    render_turn,
)
from agentkit.store.backend import (
    JournalBackend,
    Lease,
    LeaseMovedError,
    RecordKind,
    enter_lease,
    leave_lease,
)
from agentkit.store.forks import checkpoints_of, fork_records
from agentkit.store.records import ConversationRecord
from agentkit.store.values import (
    NOTE_KINDS,
    CallRecordSink,
    ConversationKey,
    Prepare,
    Problem,
    VerifyReport,
    checked_journal,
)
from agentkit.types import ConversationMeta, ConversationStatus, Message, utc_now

__all__ = ["CUT_SHORT", "ConversationStore"]

#: the note a turn found cut short gets in its turn log (label ``ERROR``)
CUT_SHORT: Final = (
    "this turn was cut short: its writer was lost (the process killed or its connection "
    "gone) before it finished; marked failed by the next writer"
)
_CHECKPOINTS: Final[frozenset[RecordKind]] = frozenset({"checkpoint"})
_RECORDS: Final[frozenset[RecordKind]] = frozenset({"record"})


Draft = Callable[[int], JournalRecord]
"""A record to be, given its ``seq`` once the commit that writes it numbers it (its values
are checked when the draft is made, so a bad one never reaches a commit)."""

_STATUSES: Final = frozenset(get_args(ConversationStatus))
P = ParamSpec("P")
T = TypeVar("T")
_LABEL: Final = re.compile(LABEL_PATTERN)


def _status(status: ConversationStatus, at: datetime) -> Draft:
    if status not in _STATUSES:
        raise ValueError(f"invalid conversation status {status!r}: one of {sorted(_STATUSES)}")
    return lambda seq: StatusRecord(seq=seq, status=status, at=at)


def _note(message_id: str, label: str, text: str, at: datetime) -> Draft:
    check_id(message_id, "message")
    if not isinstance(label, str) or not _LABEL.match(label):
        raise ValueError(f"invalid turn-log label {label!r}: {LABEL_PATTERN}")
    if not isinstance(text, str):
        raise ValueError(f"a turn-log note is text, not {type(text).__name__}")
    return lambda seq: AnnotationRecord(
        seq=seq, message_id=message_id, label=label, text=text, at=at
    )


class _Hold:
    """A lease the running turn holds, and the notes made under it, not yet written."""

    __slots__ = ("lease", "pending")

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.pending: list[Draft] = []


#: the holds of the running turn (its context's): (id of the store, key) → hold; replaced,
#: never mutated, as :data:`agentkit.store.backend._LEASES` is
_HOLDS: ContextVar[Mapping[tuple[int, ConversationKey], _Hold]] = ContextVar(
    "agentkit_holds", default=MappingProxyType({})
)


class ConversationStore:
    """Conversations of agents: create, append, read, fork, delete; one writer at a time.

    Messages and status changes are acknowledged (the method returns) only once they are
    durable; turn-log notes and checkpoints ride along with the next of them. Writers on one
    conversation are serialised across threads and processes; a writer that waits longer than
    the store's lock timeout gets :class:`~agentkit.errors.ConversationBusyError`.
    """

    def __init__(self, backend: JournalBackend) -> None:
        self.backend = backend

    @property
    def lock_timeout(self) -> float:
        """How long a writer waits for a busy conversation (seconds)."""
        return self.backend.lock_timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        self.backend.lock_timeout = seconds

    # ------------------------------------------------------------------ the writer lease

    def _held(self, key: ConversationKey) -> _Hold | None:
        """The running turn's hold on *key* (not one it let go, nor one inherited across
        ``fork``): the turn's context says, whichever thread runs the call."""
        hold = _HOLDS.get().get((id(self), key))
        if hold is None or not hold.lease.held or hold.lease.pid != pid():
            return None
        return hold

    def _enter(self, lease: Lease) -> _Hold:
        hold = _Hold(lease)
        _HOLDS.set({**_HOLDS.get(), (id(self), lease.key): hold})
        enter_lease(self.backend, lease)
        lease_entered(lease)  # counted: another turn's store calls go to the pool meanwhile
        return hold

    def _leave(self, hold: _Hold) -> None:
        lease_left(hold.lease)
        leave_lease(self.backend, hold.lease)
        current = _HOLDS.get()
        slot = (id(self), hold.lease.key)
        if current.get(slot) is hold:
            _HOLDS.set({k: v for k, v in current.items() if k != slot})

    @contextmanager
    def hold(self, key: ConversationKey, timeout: float | None = None) -> Iterator[None]:
        """Hold the conversation's writer lease across several writes (a turn; re-entrant).

        The hold is the running turn's (its context's, see :class:`Lease`), not the
        thread's: the turn's writes run wherever they are sent (:meth:`aappend` in a
        thread) and find it there. A turn found cut short before it (its status left
        ``running``) is marked failed with this holder's first commit (see the module
        docstring)."""
        with self._hold(key, timeout, brief=False, settle=True):
            yield

    @asynccontextmanager
    async def ahold(
        self, key: ConversationKey, timeout: float | None = None
    ) -> AsyncIterator[None]:
        """:meth:`hold` for a coroutine: on a remote backend (PostgreSQL: a round trip) the
        lease is taken and let go in a store thread
        (:func:`~agentkit.store._offload.off_loop`, which never runs a remote call inline),
        so it never stops the event loop; a local one's (a ``flock``) is taken at once."""
        if self._held(key) is not None:
            yield
            return
        wait = self.backend.lock_timeout if timeout is None else timeout
        lease = await self._away(self.backend.acquire, key, wait, brief=False)
        try:
            hold = self._enter(lease)
        except BaseException:
            await self._away(self.backend.release, lease, failed=True)
            raise
        failed = True
        try:
            if lease.meta.status == "running":
                await off_loop(self._settle, hold)
            yield
            failed = False
        finally:
            try:
                await self._away(self._let_go, hold, failed)
            finally:
                self._leave(hold)

    async def _away(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """*call* in a store thread when the backend is remote (a round trip); a local one's
        lease and reads (a lock, the page cache) are answered at once, on the loop."""
        if self.backend.remote:
            return await off_loop(call, *args, **kwargs)
        return call(*args, **kwargs)

    def _let_go(self, hold: _Hold, failed: bool) -> None:
        """The notes still pending under *hold* written, then its lease released."""
        try:
            if hold.pending:  # notes made under the lease, not yet written
                with suppress(StoreError, ConversationNotFoundError):
                    self._write_pending(hold)
        finally:
            self.backend.release(hold.lease, failed=failed)

    def _write_pending(self, hold: _Hold) -> None:
        batch, hold.pending = hold.pending, []
        try:
            self._append(hold.lease, batch, None, durable=False)
        except LeaseMovedError:
            self._append(hold.lease, batch, None, durable=False)

    @contextmanager
    def _hold(
        self,
        key: ConversationKey,
        timeout: float | None = None,
        *,
        brief: bool = True,
        settle: bool = True,
    ) -> Iterator[_Hold]:
        """The running turn's hold on *key*, taken for the block if it has none. *settle*: a
        turn found cut short is marked failed (not by a delete, nor a repair)."""
        held = self._held(key)
        if held is not None:
            yield held
            return
        wait = self.backend.lock_timeout if timeout is None else timeout
        lease = self.backend.acquire(key, wait, brief=brief)
        hold = self._enter(lease)
        failed = True
        try:
            if settle and lease.meta.status == "running":
                self._settle(hold)
            yield hold
            failed = False
        finally:
            try:
                self._let_go(hold, failed)
            finally:
                self._leave(hold)

    @contextmanager
    def _reading(self, key: ConversationKey, wait: float) -> Iterator[None]:
        """Writers kept out of *key* for a read that must see it whole (the turn's own
        hold, if it has one)."""
        if self._held(key) is not None:
            yield
            return
        with self.backend.exclusive(key, wait):
            yield

    def _settle(self, hold: _Hold) -> None:
        """The turn that left the status ``running`` died: its note and ``failed`` go first
        in this holder's next commit."""
        now = utc_now()
        key = hold.lease.key
        last = self.backend.read(key, _MESSAGE, last=1)
        if last and isinstance(last[0], MessageRecord):
            hold.pending.append(_note(last[0].message.message_id, "ERROR", CUT_SHORT, now))
        hold.pending.append(_status("failed", now))

    # ------------------------------------------------------------------ writes

    def _commit(
        self,
        key: ConversationKey,
        records: Sequence[Draft],
        *,
        durable: bool = True,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Append the notes waiting under the lease, *records* and the *checkpoint* (filled
        in as the conversation stands after them) in one backend append."""
        hold = self._held(key)
        if hold is None:  # a write of its own: a brief lease for it
            with self._hold(key):
                return self._commit(key, records, durable=durable, checkpoint=checkpoint)
        lease = hold.lease
        batch = [*hold.pending, *records] if hold.pending else records
        hold.pending = []
        if not batch and checkpoint is None:
            return lease.meta
        try:
            self._append(lease, batch, checkpoint, durable=durable)
        except LeaseMovedError:  # an earlier write had landed after all: number again
            self._append(lease, batch, checkpoint, durable=durable)
        return lease.meta

    def _append(
        self,
        lease: Lease,
        batch: Sequence[Draft],
        checkpoint: TurnCheckpoint | None,
        *,
        durable: bool,
    ) -> None:
        """*batch* numbered after the lease's records, and the checkpoint filled in."""
        views = Views.resume(lease.meta, lease.records)
        numbered: list[JournalRecord] = []
        for draft in batch:
            record = draft(views.records + 1)
            views.apply(record)
            numbered.append(record)
        if checkpoint is not None:
            done = {"messages": views.message_count, "status": views.status}
            mark = CheckpointRecord(
                seq=views.records + 1, checkpoint=checkpoint.model_copy(update=done)
            )
            views.apply(mark)
            numbered.append(mark)
        self.backend.append(lease, numbered, views.meta, durable=durable)

    def create(self, key: ConversationKey, title: str) -> ConversationMeta:
        """Create an empty conversation (status ``idle``). Fails if it exists."""
        record = CreatedRecord(
            seq=1,
            conversation_id=key.conversation_id,
            agent_id=key.agent_id,
            title=title,
            at=utc_now(),
        )
        meta = fold([record]).meta
        self.backend.create(key, [record], meta, {})
        return meta

    def append(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Append one message durably; return the updated metadata.

        With *status*, the conversation's status changes in the same commit (one durability
        point: a turn's user message with ``running``, its answer with the final status).
        With *checkpoint*, the finished turn's checkpoint is in that commit too (its
        ``messages`` and ``status`` are set to what they are after it).
        """
        if not isinstance(message, Message):
            raise ValueError(f"a message is a Message, not {type(message).__name__}")
        records: list[Draft] = [lambda seq: MessageRecord(seq=seq, message=message)]
        if status is not None:
            records.append(_status(status, utc_now()))
        return self._commit(key, records, checkpoint=checkpoint)

    async def aappend(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """:meth:`append` in a store thread when another turn waits (the event loop serves it
        while this one's write waits for the disk), inline when this turn is alone
        (:func:`~agentkit.store._offload.off_loop`); acknowledged (returned) once durable,
        as ever."""
        return await off_loop(self.append, key, message, status=status, checkpoint=checkpoint)

    async def aset_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """:meth:`set_status` off the loop when another turn waits (see :meth:`aappend`)."""
        return await off_loop(self.set_status, key, status, checkpoint=checkpoint)

    def set_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Change the status durably (with *checkpoint*: as in :meth:`append`)."""
        return self._commit(key, [_status(status, utc_now())], checkpoint=checkpoint)

    def annotate(self, key: ConversationKey, message_id: str, label: str, text: str) -> None:
        """Add a ``[LABEL]`` block to the turn's ``messages.log`` (not part of the history).

        Not a durability point: inside a turn (it holds the lease) the note is
        written with the turn's next commit, or when the turn lets go, whichever comes first;
        otherwise at once, without waiting for the disk (a crash before the next durable
        commit may lose it; it never loses a message)."""
        record = _note(message_id, label, text, utc_now())
        hold = self._held(key)
        if hold is not None:
            hold.pending.append(record)
        else:
            self._commit(key, [record], durable=False)

    def record_checkpoint(self, key: ConversationKey, checkpoint: TurnCheckpoint) -> None:
        """Append the checkpoint of a finished turn to the conversation's journal (its
        ``messages`` and ``status`` are set to the conversation's, as with ``append``).

        Not a durability point: written right after the turn's final commit, it rides along
        with the conversation's next one (a kill -9 loses nothing; a power loss before the
        next turn can leave the last turn without its checkpoint, i.e. not forkable there)."""
        self._commit(key, (), durable=False, checkpoint=checkpoint)

    def add_record(self, key: ConversationKey, record: ConversationRecord) -> None:
        """Keep a typed record (:mod:`agentkit.store.records`) in order with the messages,
        durably (a compression's, a reset's). Its ``start`` must not pass the history's end."""
        with self._hold(key) as hold:
            count = hold.lease.meta.stats.message_count
            if record.start > count:
                raise UsageError(
                    f"a record of {key} starts at message {record.start}; it has {count}"
                )
            entry = RecordEntry(seq=1, record=record)  # checked here, numbered by the commit
            self._commit(key, [lambda seq: entry.model_copy(update={"seq": seq})])

    def delete(self, key: ConversationKey) -> None:
        with self._hold(key, settle=False) as hold:
            hold.pending = []
            self.backend.delete(hold.lease)

    # ------------------------------------------------------------------ reads

    def exists(self, key: ConversationKey) -> bool:
        return self.backend.exists(key)

    def conversations(self, agent_id: str) -> list[ConversationMeta]:
        """Every conversation of *agent_id*, most recently updated first."""
        check_id(agent_id, "agent")
        metas = self.backend.listing(agent_id)
        return sorted(metas, key=lambda m: (m.updated_at, m.conversation_id), reverse=True)

    def meta(self, key: ConversationKey) -> ConversationMeta:
        hold = self._held(key)
        return hold.lease.meta if hold is not None else self.backend.meta(key)

    def messages(self, key: ConversationKey) -> Sequence[Message]:
        """The whole history, oldest first (a read-only sequence; a long one may validate
        each message when it is first read)."""
        return self.backend.messages(key)

    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        """The last *limit* messages, oldest first, without reading the whole history."""
        if limit < 0:
            raise UsageError("limit must be >= 0")
        if limit == 0:
            self.meta(key)  # a missing conversation is still an error
            return []
        return self.backend.recent(key, limit)

    async def arecent(self, key: ConversationKey, limit: int) -> list[Message]:
        """:meth:`recent`, in a store thread when the backend is remote (a round trip)."""
        return await self._away(self.recent, key, limit)

    def turn_log(self, key: ConversationKey, message_id: str) -> str:
        """The text of the turn's ``messages.log``."""
        check_id(message_id, "message")
        hold = self._held(key)
        if hold is not None and hold.pending:
            self._commit(key, (), durable=False)  # the turn's notes, not yet written
        records = self.backend.read(key, turn=message_id)
        if not records:
            raise UsageError(f"conversation {key} has no turn {message_id!r}")
        return render_turn(records)

    def checkpoints(self, key: ConversationKey) -> list[TurnCheckpoint]:
        """The checkpoints of the conversation's finished turns, oldest first."""
        return checkpoints_of(self.backend.read(key, _CHECKPOINTS))

    def last_checkpoint(self, key: ConversationKey) -> TurnCheckpoint | None:
        """The newest checkpoint (None: no turn has finished)."""
        found = checkpoints_of(self.backend.read(key, _CHECKPOINTS, last=1))
        return found[-1] if found else None

    def records(self, key: ConversationKey) -> list[ConversationRecord]:
        """The conversation's typed records, oldest first."""
        return [r.record for r in self.backend.read(key, _RECORDS) if isinstance(r, RecordEntry)]

    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        """The conversation's acknowledged records, oldest first, as its journal holds them
        (every message, status, note, checkpoint and typed record): what export copies."""
        with self._reading(key, self.lock_timeout):
            return self.backend.read(key)

    # ------------------------------------------------------------------ traces

    def open_call_records(self, key: ConversationKey, message_id: str) -> CallRecordSink:
        """Where turn *message_id*'s model calls are traced (the file store: its
        ``calls.jsonl``). Not a durability point: a line is durable with the conversation's
        next commit. A fork carries the traces of the turns it copies."""
        check_id(message_id, "message")
        return self.backend.open_call_records(key, message_id)

    def call_records(self, key: ConversationKey, message_id: str) -> list[str]:
        """The trace lines of turn *message_id*, in order (empty: none kept)."""
        check_id(message_id, "message")
        return self.backend.call_records(key, message_id)

    def folder(self, key: ConversationKey) -> Path | None:
        """The conversation's folder on disk (where each turn's files go, ``calls.jsonl``
        traces included, see :mod:`agentkit.layout`); None for a store without files."""
        return self.backend.folder(key)

    # ------------------------------------------------------------------ new conversations

    def fork(
        self,
        source: ConversationKey,
        target: ConversationKey,
        *,
        title: str,
        at: str | None,
        prepare: Prepare | None = None,
    ) -> ConversationMeta:
        """Create *target* as a fork of *source* at turn *at* (None: its last finished turn;
        ``FORK_START``: before the first), all or nothing, with the traces of the turns it
        copies; *source* is only read (its lease is taken without waiting: busy is an error).
        *prepare* runs before the fork is visible, with the checkpoint the fork ends at."""
        with self._reading(source, 0):
            records, checkpoint = fork_records(
                self.backend.read(source), source, target, title=title, at=at
            )
            if self.backend.exists(target):
                raise UsageError(f"conversation {target} already exists")
            views = fold(records)
            traces = {turn: self.backend.call_records(source, turn) for turn in views.turns}
            ready = None if prepare is None else (lambda: prepare(checkpoint))
            self.backend.create(target, records, views.meta, traces, ready)
            return views.meta

    def restore(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        traces: Mapping[str, Sequence[str]],
    ) -> ConversationMeta:
        """Create *key* from *records* (:func:`~agentkit.store.values.checked_journal`) and
        the turns' *traces*, exactly, all or nothing: what import writes. Fails if it exists."""
        views = checked_journal(key, records)
        kept = {check_id(turn, "message"): list(lines) for turn, lines in traces.items() if lines}
        self.backend.create(key, records, views.meta, kept)
        return views.meta

    # ------------------------------------------------------------------ verify, recover

    def verify(self, agent_id: str | None = None) -> VerifyReport:
        """Check every conversation (of one agent, or all) without changing anything: its
        records read and numbered 1…n, and every view the backend keeps their fold."""
        if agent_id is not None:
            check_id(agent_id, "agent")
        found = self.backend.leftovers(agent_id, remove=False)
        keys = self.backend.keys(agent_id)
        for key in keys:
            found.extend(self._verify_one(key))
        problems = tuple(p for p in found if p.kind not in NOTE_KINDS)
        notes = tuple(p for p in found if p.kind in NOTE_KINDS)
        return VerifyReport(conversations=len(keys), problems=problems, notes=notes)

    def _verify_one(self, key: ConversationKey) -> list[Problem]:
        agent, name = key.agent_id, key.conversation_id
        try:
            with self._reading(key, min(1.0, self.lock_timeout)):
                scanned = self.backend.scan(key)
                if scanned.records is None:
                    return scanned.problems
                try:
                    views = fold(scanned.records)
                except ValueError as error:
                    detail = str(error).splitlines()[0]
                    return [*scanned.problems, Problem(agent, name, "corrupt-record", detail)]
                return [*scanned.problems, *self.backend.check(key, views, scanned)]
        except ConversationBusyError:
            return [Problem(agent, name, "busy", "a writer held it; not checked")]
        except ConversationNotFoundError:
            return [Problem(agent, name, "missing-file", "it holds no journal")]

    def recover(self, agent_id: str | None = None, *, full: bool = False) -> list[ConversationKey]:
        """Repair what crashes left behind; return the conversations that were repaired.

        Leftovers of interrupted creates and deletes are removed. By default only what a
        crash can leave is repaired (the file store: views behind their journal); ``full``
        also repairs damage done by hand (every view rebuilt from the records). Busy
        conversations are left to their writer; a damaged one to a person (``verify``
        reports it), without stopping the others' recovery."""
        if agent_id is not None:
            check_id(agent_id, "agent")
        self.backend.leftovers(agent_id, remove=True)
        repaired: list[ConversationKey] = []
        for key in self.backend.keys(agent_id):
            if not full and self.backend.settled(key):
                continue
            with (
                suppress(ConversationBusyError, ConversationNotFoundError, StoreError),
                self._hold(key, timeout=0, settle=False) as hold,
            ):
                if self.backend.repair(hold.lease, full=full):
                    repaired.append(key)
        return repaired


_MESSAGE: Final[frozenset[RecordKind]] = frozenset({"message"})
