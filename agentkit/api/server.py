"""Running the API under uvicorn (what ``agentkit serve`` does).

The app is built before the socket is bound, so a refused configuration (a non-loopback host
without a token, a malformed token) fails with a :class:`~agentkit.errors.UsageError` and
nothing listening.

``workers=N`` runs N server processes on one port: uvicorn binds the socket once and each
worker process accepts on it (pre-forked; the kernel hands each connection to one of them),
each building its own app from the same settings (:func:`worker_app`). Every route works
across them because what a turn shares lives in the store, whichever: the writer lock (a
``flock`` on the file store, an advisory lock on PostgreSQL: a busy conversation is 409 in
every process), the approvals and their decisions (decided once, under that lock), and the
running turns' events (``Last-Event-ID``) and cancels — in each conversation's folder, with
wake-ups over the data root's Unix sockets (:mod:`agentkit.store.file_events`), or in
PostgreSQL with ``LISTEN``/``NOTIFY`` (:mod:`agentkit.store.postgres_events`).

A server process settles its heap once its app is built (:func:`settle_heap`): what start-up
made (modules, schemas, the agents' configs: ~75,000 objects) moves out of the collector's
sight, and the youngest generation is collected every :data:`GC_GEN0` allocations instead of
Python's 700 (``AGENTKIT_GC_GEN0`` sets another count; ``0`` leaves the collector alone).
Measured (bench_serve's 50 SSE clients on a scripted model, two 10 s windows, 3 interleaved
pairs): the collector's CPU 1.9-2.2 s → 0.82-0.86 s of the server's ~20 s, full collections
11-12 → 2 (each a ~100 ms pause of every turn in flight). Cycles are still collected, only
less often.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from agentkit.api.app import DEFAULT_PORT, create_app
from agentkit.errors import UsageError
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.store.choice import resolve_store_spec

__all__ = ["GC_GEN0", "GC_GEN0_ENV", "WORKER_ENV", "serve", "settle_heap", "worker_app"]

#: the settings a worker process builds its app from (JSON, set by :func:`serve`)
WORKER_ENV = "AGENTKIT_SERVE_WORKER"

#: allocations between two collections of the youngest generation in a server process
GC_GEN0 = 10_000
#: the environment variable that sets it for ``agentkit serve`` (``0``: Python's collector
#: left exactly as it is, nothing frozen)
GC_GEN0_ENV = "AGENTKIT_GC_GEN0"


def settle_heap() -> None:
    """Freeze what exists now and collect the young generation every :data:`GC_GEN0` (or
    ``$AGENTKIT_GC_GEN0``) allocations (see the module docstring); for a process that serves
    from here on."""
    raw = os.environ.get(GC_GEN0_ENV, "").strip()
    try:
        gen0 = int(raw) if raw else GC_GEN0
    except ValueError:
        raise UsageError(f"{GC_GEN0_ENV} is a whole number of allocations, not {raw!r}") from None
    if gen0 < 0:
        raise UsageError(f"{GC_GEN0_ENV} is 0 (leave the collector alone) or more, not {gen0}")
    if gen0 == 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)


def serve(
    data_dir: Path | str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    model: ChatModel | SessionBackend | str | None = None,
    allowed_hosts: Iterable[str] | None = None,
    cors_origins: Iterable[str] = (),
    log_level: str = "info",
    announce: Callable[[str], None] | None = None,
    store: str | None = None,
    workers: int = 1,
) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM); running turns finish before exit.
    *workers* > 1: that many processes on the port (see the module docstring)."""
    if workers < 1:
        raise UsageError(f"--workers is at least 1, not {workers}")
    app = create_app(
        data_dir,
        model=model,
        token=token,
        host=host,
        port=port,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
        store=store,
        workers=workers,
    )
    if announce is not None:
        shown = f"[{host}]" if ":" in host else host
        auth = "a bearer token is required" if token else "no token: loopback clients only"
        announce(f"agentkit: serving {app.state.served.data_dir} on http://{shown}:{port} ({auth})")
    if workers > 1:
        _serve_workers(
            app,
            workers,
            model=model,
            store=store,
            host=host,
            port=port,
            token=token,
            allowed_hosts=allowed_hosts,
            cors_origins=cors_origins,
            log_level=log_level,
        )
        return
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        proxy_headers=False,  # never trust X-Forwarded-* from a client
        server_header=False,
        timeout_graceful_shutdown=30,
    )
    settle_heap()
    uvicorn.Server(config).run()


def _serve_workers(
    app: FastAPI,
    workers: int,
    *,
    model: ChatModel | SessionBackend | str | None,
    store: str | None,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: Iterable[str] | None,
    cors_origins: Iterable[str],
    log_level: str,
) -> None:
    """*workers* processes on one socket, each building its app from :data:`WORKER_ENV`
    (the app built here only checked the settings)."""
    spec = resolve_store_spec(store)
    if model is not None and not isinstance(model, str):
        raise UsageError("--workers N takes the model as a spec string, not an object")
    settings = {
        "data_dir": str(app.state.served.data_dir),
        "model": model,
        "token": token,
        "host": host,
        "port": port,
        "allowed_hosts": None if allowed_hosts is None else list(allowed_hosts),
        "cors_origins": list(cors_origins),
        "store": spec,
        "workers": workers,
    }
    os.environ[WORKER_ENV] = json.dumps(settings)
    uvicorn.run(
        "agentkit.api.server:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level=log_level,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=30,
    )


def worker_app() -> FastAPI:
    """The app of one worker process of ``agentkit serve --workers N`` (uvicorn's factory)."""
    raw = os.environ.get(WORKER_ENV)
    if not raw:
        raise UsageError(f"{WORKER_ENV} is not set: this factory serves `agentkit serve` workers")
    settings = json.loads(raw)
    app = create_app(
        settings["data_dir"],
        model=settings["model"],
        token=settings["token"],
        host=settings["host"],
        port=settings["port"],
        allowed_hosts=settings["allowed_hosts"],
        cors_origins=settings["cors_origins"],
        store=settings["store"],
        workers=settings["workers"],
    )
    settle_heap()
    return app
