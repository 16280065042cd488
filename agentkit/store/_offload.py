"""Store calls run off the event loop, and finish even when the turn awaiting them is cancelled.

Why: a durable write waits for the disk (an fsync) or the network (a PostgreSQL commit); on
the event loop that wait stops every other turn of the process. :func:`off_loop` runs the
call in a thread of the stores' pool with a copy of the calling turn's context, so the
turn's leases (:class:`~agentkit.store.backend.Lease`, found through the context) go with
it, while the loop serves other turns.

A write once sent is never abandoned: if the awaiting task is cancelled meanwhile, it still
waits for the thread to finish before the cancellation goes on. Otherwise the turn would let
go of its lease (closing the files or the connection the write is using) under a write in
flight, and could not tell whether it was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from agentkit.store._process import pid

__all__ = ["off_loop"]

P = ParamSpec("P")
T = TypeVar("T")

#: threads for store calls: enough for the writes of many turns to wait for the disk (or a
#: database) side by side, where the file system and SQLite group their flushes
WORKERS = 32

_pools: dict[int, ThreadPoolExecutor] = {}  # by process: a fork's child starts its own
_guard = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    with _guard:
        pool = _pools.get(pid())
        if pool is None:
            pool = _pools[pid()] = ThreadPoolExecutor(WORKERS, thread_name_prefix="agentkit-store")
        return pool


async def off_loop(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` in a store thread, in a copy of this context; its result.

    Cancelling the caller does not abandon the call: it is waited for, then the
    cancellation is raised (with the call's error as its cause, if it failed)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(
        _executor(), functools.partial(context.run, call, *args, **kwargs)
    )
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))  # a cancelled wait leaves the call running
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:  # the call is over: now the cancellation (its error, if any, as cause)
        raise asyncio.CancelledError from future.exception()
    return future.result()
