"""The journal backend: what a conversation store keeps, and the one writer it lets write.

Why a seam here: everything a store does above raw storage — numbering records and folding
them into a conversation's metadata, a writer's notes riding along with its next commit,
forks, checkpoints, turn logs, typed records, the shape of ``verify`` and ``recover``, a turn
found cut short — is the same for every store, so
:class:`~agentkit.store.conversation_store.ConversationStore` does it once, over this small
interface. A backend only keeps a conversation's records in order, and lets one writer at a
time append to them:

* **a writer lease with fencing** (:meth:`~JournalBackend.acquire`,
  :meth:`~JournalBackend.release`): one holder per conversation across threads, processes
  and (PostgreSQL) replicas. A lease that is no longer held — released, or lost (PostgreSQL:
  its session ended and another writer took the conversation) — can never append
  (:class:`~agentkit.store.values.StaleWriterError`);
* **append** numbered records with the metadata they fold to (:meth:`~JournalBackend.append`),
  durably when asked (acknowledged once on disk / flushed to the WAL); **create** a
  conversation whole, its records and its turns' traces, or not at all; **delete** one;
* **read** records — all of them, of some kinds, of one turn, the last N — oldest first;
  the turns' model-call **traces**; **list** conversations;
* what ``verify`` and ``recover`` need: every record read without failing on damage
  (:meth:`~JournalBackend.scan`), the views a backend keeps checked against the fold
  (:meth:`~JournalBackend.check`), and repairs only it knows how to make.

Three backends pass one contract suite (tests/test_journal_backend.py): the files of the
seed's layout (:mod:`agentkit.store.files`), memory (:mod:`agentkit.store.memory`) and
PostgreSQL (:mod:`agentkit.store.postgres`, the ``postgres`` extra).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Literal, Self

from agentkit.errors import StoreError, UsageError
from agentkit.store._process import pid
from agentkit.store._records import JournalRecord, MessageRecord, Views
from agentkit.store.values import CallRecordSink, ConversationKey, Problem, StaleWriterError
from agentkit.types import ConversationMeta, Message

__all__ = [
    "JournalBackend",
    "Lease",
    "LeaseMovedError",
    "RecordKind",
    "Scanned",
    "enter_lease",
    "held_lease",
    "leave_lease",
    "turn_leases",
]

RecordKind = Literal["created", "message", "status", "annotation", "checkpoint", "forked", "record"]
"""The ``kind`` of a journal record (:mod:`agentkit.store._records`)."""


class LeaseMovedError(StoreError):
    """The conversation had moved on under a lease when it was to append: a write of its
    holder whose outcome was lost (a connection dropped, an I/O error) had reached the
    journal after all. The backend has brought the lease up to date and appended nothing;
    the records are numbered again from it (the conversation layer does, once)."""


class Lease:
    """One writer's hold on one conversation, as its backend granted it.

    ``meta`` and ``records`` are the conversation as it stands for this writer: its metadata
    and the number of its records (the ``seq`` of the last), as acquired and then moved along
    by every :meth:`JournalBackend.append`. ``epoch`` tells this lease from the conversation's
    earlier and later ones (the fencing token); ``held`` turns False when it is released.

    A lease belongs to the turn that took it, not to a thread: the conversation layer
    registers it in the turn's context (:func:`enter_lease`), so the turn's writes find it
    from whichever thread runs them (a copy of the context goes with each), and another
    turn on the same thread does not (:func:`held_lease`).
    """

    __slots__ = ("epoch", "held", "key", "meta", "pid", "records")

    #: a server's lease (PostgreSQL): every call of its holder is a round trip, whose time
    #: the network decides (:func:`~agentkit.store._offload.off_loop` never runs one inline)
    remote: ClassVar[bool] = False

    def __init__(
        self, key: ConversationKey, meta: ConversationMeta, records: int, epoch: int
    ) -> None:
        self.key = key
        self.meta = meta
        self.records = records
        self.epoch = epoch
        self.held = True
        self.pid = pid()  # a lease inherited across fork() is not the child's

    def moved(self, meta: ConversationMeta, count: int) -> None:
        """*count* records were appended, and the conversation's metadata is now *meta*."""
        self.meta = meta
        self.records += count

    def stale(self, current: int) -> StaleWriterError:
        """The error for a write of this lease while epoch *current* holds the conversation."""
        return StaleWriterError(self.key.agent_id, self.key.conversation_id, self.epoch, current)

    @classmethod
    def own(cls, lease: Lease) -> Self:
        """*lease* as this backend's kind of lease (another backend's is a caller's mistake)."""
        if not isinstance(lease, cls):
            raise UsageError(f"not a lease of this backend ({cls.__name__}): {lease!r}")
        return lease


#: the leases the running turn holds (its context's): (id of the backend, key) → lease.
#: Never mutated: entering or leaving one sets a new mapping, so a context copied from the
#: turn (a thread running one of its writes, a task it started) sees the leases as they were.
_LEASES: ContextVar[Mapping[tuple[int, ConversationKey], Lease]] = ContextVar(
    "agentkit_leases", default=MappingProxyType({})
)


def held_lease(backend: object, key: ConversationKey) -> Lease | None:
    """The lease of *backend* on *key* that the calling turn holds (None: it holds none)."""
    lease = _LEASES.get().get((id(backend), key))
    if lease is None or not lease.held or lease.pid != pid():
        return None
    return lease


def turn_leases() -> list[Lease]:
    """The leases the running turn holds (of any backend; none outside a turn)."""
    me = pid()
    return [lease for lease in _LEASES.get().values() if lease.held and lease.pid == me]


def enter_lease(backend: object, lease: Lease) -> None:
    """*lease* of *backend* is the calling turn's from now on (this context and its copies)."""
    _LEASES.set({**_LEASES.get(), (id(backend), lease.key): lease})


def leave_lease(backend: object, lease: Lease) -> None:
    """*lease* is no longer the calling turn's (a no-op in a context that never had it)."""
    current = _LEASES.get()
    slot = (id(backend), lease.key)
    if current.get(slot) is lease:
        _LEASES.set({k: v for k, v in current.items() if k != slot})


@dataclass(frozen=True, slots=True)
class Scanned:
    """Every record of a conversation as ``verify`` reads it: damage is reported, not raised.

    ``records`` is None when they cannot be folded at all (a damaged record in the middle);
    ``extent`` is where the good records end in the backend's own terms (the file store:
    the journal's bytes; the others: the number of records), for :meth:`JournalBackend.check`.
    """

    records: list[JournalRecord] | None
    extent: int = 0
    problems: list[Problem] = field(default_factory=list)


class JournalBackend(ABC):
    """Where conversations' records are kept (see the module docstring).

    ``lock_timeout`` is how long a writer waits for a busy conversation by default.
    """

    lock_timeout: float
    #: every call is a round trip to a server (PostgreSQL): a coroutine sends even its reads
    #: and its lease to a store thread; a local backend (files, memory) answers those from
    #: the page cache or memory at once, and only its durable writes leave the event loop
    remote: bool = False

    # -- the writer lease ----------------------------------------------------------------

    @abstractmethod
    def acquire(self, key: ConversationKey, wait: float, *, brief: bool = False) -> Lease:
        """Take *key*'s writer lease, waiting at most *wait* seconds (0: one try).

        Raises :class:`~agentkit.errors.ConversationBusyError` when another writer holds it
        past *wait*, :class:`~agentkit.errors.ConversationNotFoundError` when there is no
        such conversation. *brief*: the lease serves one operation of the caller (a backend
        may grant it more cheaply than a turn's: PostgreSQL, one transaction)."""

    @abstractmethod
    def release(self, lease: Lease, *, failed: bool = False) -> None:
        """Let go of *lease* (idempotent). *failed*: the holder's operation raised; a
        backend that made the lease's writes one transaction rolls them back."""

    @contextmanager
    def exclusive(self, key: ConversationKey, wait: float) -> Iterator[None]:
        """Keep writers out of *key* for a read that must see it whole and change nothing
        (verify, a fork's source, an export). By default a brief lease, let go unwritten;
        the file store takes only its lock (no recovery: verify reports what it finds)."""
        lease = self.acquire(key, wait, brief=True)
        try:
            yield
        finally:
            self.release(lease, failed=True)  # nothing was written: nothing to keep

    # -- writes ----------------------------------------------------------------------------

    @abstractmethod
    def append(
        self,
        lease: Lease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        """Append *records* (numbered ``lease.records + 1`` on) under *lease*, with *meta*,
        the conversation's metadata after them; then ``lease.moved(meta, len(records))``.

        *durable*: on disk (flushed to the WAL) before this returns; otherwise it becomes
        durable with the conversation's next durable append. Raises
        :class:`~agentkit.store.values.StaleWriterError` when *lease* is no longer held,
        :class:`LeaseMovedError` when the conversation is not where *lease* says."""

    @abstractmethod
    def create(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        traces: Mapping[str, Sequence[str]],
        prepare: Callable[[], None] | None = None,
    ) -> None:
        """A new conversation holding *records* (their fold is *meta*) and its turns'
        *traces*, durably and all or nothing; *prepare* runs last, before it is visible.
        Raises :class:`~agentkit.errors.UsageError` when *key* exists."""

    @abstractmethod
    def delete(self, lease: Lease) -> None:
        """Remove the conversation *lease* holds, with its records and traces."""

    # -- reads -----------------------------------------------------------------------------

    @abstractmethod
    def exists(self, key: ConversationKey) -> bool: ...

    @abstractmethod
    def meta(self, key: ConversationKey) -> ConversationMeta:
        """The conversation's metadata as last acknowledged (not found: an error)."""

    @abstractmethod
    def listing(self, agent_id: str) -> list[ConversationMeta]:
        """The metadata of every conversation of *agent_id*, in no particular order."""

    @abstractmethod
    def keys(self, agent_id: str | None) -> list[ConversationKey]:
        """Every conversation (of one agent, or all) that ``verify`` and ``recover`` visit,
        sorted; the file store also lists folders too damaged to hold one."""

    @abstractmethod
    def read(
        self,
        key: ConversationKey,
        kinds: frozenset[RecordKind] | None = None,
        *,
        turn: str | None = None,
        last: int | None = None,
    ) -> list[JournalRecord]:
        """The conversation's acknowledged records, oldest first: all, or those of *kinds*,
        of *turn* (its messages and notes), the *last* N of them (not found: an error)."""

    def messages(self, key: ConversationKey) -> Sequence[Message]:
        """The whole history (a backend may serve it from a view of its own)."""
        return [r.message for r in self.read(key, _MESSAGES) if isinstance(r, MessageRecord)]

    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        """The last *limit* (> 0) messages, oldest first."""
        found = self.read(key, _MESSAGES, last=limit)
        return [r.message for r in found if isinstance(r, MessageRecord)]

    # -- traces ----------------------------------------------------------------------------

    @abstractmethod
    def open_call_records(self, key: ConversationKey, message_id: str) -> CallRecordSink:
        """Where turn *message_id*'s model calls are traced (not a durability point)."""

    @abstractmethod
    def call_records(self, key: ConversationKey, message_id: str) -> list[str]:
        """Turn *message_id*'s trace lines in order (not found: an error)."""

    # -- verify and recover ------------------------------------------------------------------

    @abstractmethod
    def scan(self, key: ConversationKey) -> Scanned:
        """Every record the conversation holds, damage reported (hold its lease)."""

    @abstractmethod
    def check(self, key: ConversationKey, views: Views, scanned: Scanned) -> list[Problem]:
        """What the views this backend keeps (its stored metadata, files) get wrong against
        *views*, the fold of *scanned* (hold its lease). Reads only."""

    def leftovers(self, agent_id: str | None, *, remove: bool) -> list[Problem]:
        """Agent-level leftovers of interrupted creates and deletes (removed with *remove*)."""
        return []

    def settled(self, key: ConversationKey) -> bool:
        """Nothing for a default (not ``full``) recovery to do for *key*."""
        return True

    def repair(self, lease: Lease, *, full: bool) -> bool:
        """Bring what the backend keeps beside the records in line with them (all of it when
        *full*); whether anything was repaired."""
        return False

    def folder(self, key: ConversationKey) -> Path | None:
        """The conversation's folder on disk; None for a backend without files."""
        return None


_MESSAGES: frozenset[RecordKind] = frozenset({"message"})
