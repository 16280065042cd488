"""Store calls off the event loop when someone else waits on it; finished even when cancelled.

Why: a durable write waits for the disk (an fsync) or the network (a PostgreSQL commit); on
the event loop that wait stops every other turn of the process. :func:`off_loop` runs such a
call in a thread of the stores' pool with a copy of the calling turn's context, so the
turn's leases (:class:`~agentkit.store.backend.Lease`, found through the context) go with
it, while the loop serves other turns. But when nobody else waits, the pool only costs: two
hand-offs between threads per call (the call sent, the loop woken with its result), each a
wake-up the scheduler may delay on a busy machine, for a wait the turn sits out anyway. So a
turn's store call runs inline when the turn is alone, and goes to the pool only under
contention.

**When a turn is alone** (:func:`alone`: two counters of this process and the caller's
context, read without a lock or a system call), all of these hold:

* the caller is a turn: its context holds a conversation's writer lease (every turn holds
  its conversation's from admission to its end:
  :meth:`~agentkit.store.conversation_store.ConversationStore.ahold`);
* every lease held in this process now is the caller's own: no other turn is admitted
  (waiting for its model, its tool or its own write), no background upkeep runs, no writer
  in another thread holds a brief lease;
* no store call of anyone is in the pool now;
* the turn's store is local (the file store, memory): a call lasts as long as the disk
  takes. A PostgreSQL turn's calls always go to the pool: their time is the network's, and
  a connection lost without a word could hold the loop for seconds, which that store
  promises never to do.

Otherwise the call goes to the pool, as every call did before. The signal errs towards the
pool (a turn that merely waits for its model counts as waiting), and what it cannot see is
bounded: a request not admitted yet (a new connection, a read of a stored stream) waits for
at most the one write in progress (one fsync), after which its turn's lease counts. A call
made outside a turn (a route listing conversations, creating one, a turn taking its lease)
always goes to the pool: its length is not bounded by one write. Other processes (``serve
--workers N``) are not counted: each has its own loop, and the disk orders their writes as
before.

Nothing else changes with where a call runs: it runs in a copy of the caller's context
either way and returns once the write is acknowledged (durable when asked); the durability
points, the writer lease and its fencing are the store's, not this module's.

A write once sent to the pool is never abandoned: if the awaiting task is cancelled
meanwhile, it still waits for the thread to finish before the cancellation goes on.
Otherwise the turn would let go of its lease (closing the files or the connection the write
is using) under a write in flight, and could not tell whether it was acknowledged. (An
inline call cannot be cancelled half-way: it holds the loop until it returns.)
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from agentkit.store._process import pid
from agentkit.store.backend import Lease, turn_leases

__all__ = ["alone", "lease_entered", "lease_left", "off_loop"]

P = ParamSpec("P")
T = TypeVar("T")

#: threads for store calls: enough for the writes of many turns to wait for the disk (or a
#: database) side by side, where the file system and SQLite group their flushes
WORKERS = 32

_pools: dict[int, ThreadPoolExecutor] = {}  # by process: a fork's child starts its own
_guard = threading.Lock()


class _Traffic:
    """This process's leases held (by any turn or brief writer, in any thread) and store
    calls in the pool; a forked child starts from none (what it inherited is not its own)."""

    __slots__ = ("calls", "leases")

    def __init__(self) -> None:
        self.leases = 0
        self.calls = 0


_traffic = _Traffic()
_counting = threading.Lock()


def _after_fork() -> None:  # in the child: no lease or call of the parent's is its own
    global _traffic, _counting
    _traffic, _counting = _Traffic(), threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def lease_entered(lease: Lease) -> None:
    """*lease* is held by a writer of this process from now on (the conversation layer
    calls this as a turn, or a brief writer, enters it)."""
    with _counting:
        _traffic.leases += 1


def lease_left(lease: Lease) -> None:
    """The writer that entered *lease* has left it (a lease inherited across ``fork`` was
    never counted in this process)."""
    if lease.pid == pid():
        with _counting:
            _traffic.leases -= 1


def alone() -> bool:
    """Is the calling turn alone in this process, on a local store (see the module
    docstring)? False outside a turn."""
    if _traffic.calls:
        return False
    mine = turn_leases()
    return bool(mine) and _traffic.leases <= len(mine) and not any(m.remote for m in mine)


def _executor() -> ThreadPoolExecutor:
    with _guard:
        pool = _pools.get(pid())
        if pool is None:
            pool = _pools[pid()] = ThreadPoolExecutor(WORKERS, thread_name_prefix="agentkit-store")
        return pool


def _counted(call: Callable[[], T]) -> T:
    try:
        return call()
    finally:
        with _counting:
            _traffic.calls -= 1


async def off_loop(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` in a copy of this context, its result: inline when the
    calling turn is alone (:func:`alone`), otherwise in a store thread.

    Cancelling the caller does not abandon a call sent to a thread: it is waited for, then
    the cancellation is raised (with the call's error as its cause, if it failed)."""
    context = contextvars.copy_context()
    if alone():  # nobody else waits on the loop: no hand-off
        return context.run(call, *args, **kwargs)
    loop = asyncio.get_running_loop()
    with _counting:
        _traffic.calls += 1
    try:
        future = loop.run_in_executor(
            _executor(), _counted, functools.partial(context.run, call, *args, **kwargs)
        )
    except BaseException:
        with _counting:
            _traffic.calls -= 1
        raise
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))  # a cancelled wait leaves the call running
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:  # the call is over: now the cancellation (its error, if any, as cause)
        raise asyncio.CancelledError from future.exception()
    return future.result()
