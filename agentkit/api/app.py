"""``create_app``: the HTTP API over one data root, built from its collaborators.

Nothing lives at module level: each call builds its own agents, session pool, turn registry
and guard policy, so tests and embedders can run several apps side by side. The lifespan
closes what the app opened: on shutdown the running turns are awaited (they persist their
replies), then sessions, models and memory stores are closed.

Every request passes the guard first (:func:`~agentkit.api.security.guarded`). The turn
streams are then served plain, in front of FastAPI's middleware stack
(:class:`~agentkit.api.streams.PlainStreams`); every other request, and every request to
them that is not certainly valid, is FastAPI's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from starlette.types import ASGIApp

import agentkit
from agentkit.agent_folder import resolve_data_dir
from agentkit.api.agents import ServedAgents
from agentkit.api.errors import install_error_handlers
from agentkit.api.openapi import build_openapi
from agentkit.api.recorder import RecordingTurnTasks
from agentkit.api.routes import router
from agentkit.api.security import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    GuardPolicy,
    guarded,
)
from agentkit.api.streams import PlainStreams
from agentkit.models.base import ChatModel, SessionBackend

__all__ = ["DEFAULT_PORT", "create_app"]

DEFAULT_PORT = 8765


class _App(FastAPI):
    """FastAPI's app, with the turn streams served plain in front of its middleware."""

    def build_middleware_stack(self) -> ASGIApp:
        state = self.state
        stack = super().build_middleware_stack()
        return PlainStreams(stack, state.served, state.turns, state.policy)


def create_app(
    data_dir: Path | str | None = None,
    *,
    model: ChatModel | SessionBackend | str | None = None,
    token: str | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    allowed_hosts: Iterable[str] | None = None,
    cors_origins: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    shutdown_timeout: float = 60.0,
    store: str | None = None,
    workers: int = 1,
) -> FastAPI:
    """The API app serving the agents under *data_dir* (default ``$AGENTKIT_DATA_DIR``/data).

    *model* overrides every agent's model (a backend object, or a spec string such as
    ``scripted:replies.json``); *host* and *port* are where the server is bound: the Host
    header must name them (or one of *allowed_hosts*), and a non-loopback *host* without a
    *token* raises :class:`~agentkit.errors.UsageError`. With *cors_origins* empty no CORS
    header is ever sent. *store* names where conversations and memory live (a
    ``postgresql://…`` URL; default ``$AGENTKIT_STORE``, else the files under *data_dir*).
    *workers* is how many processes serve the data root together (``agentkit serve
    --workers N``: each builds its own app); above 1 on the file store, running turns'
    events and cancels go through the store's files so that every process sees them.
    """
    policy = GuardPolicy.for_server(
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
        max_body_bytes=max_body_bytes,
        max_json_depth=max_json_depth,
    )
    served = ServedAgents(resolve_data_dir(data_dir), model, store, workers=workers)
    turns = RecordingTurnTasks(served.events)  # each turn's events, for …/turns/{id}/events

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # other processes' wake-ups and cancels (PostgreSQL LISTEN, the file store's sockets
        # under several workers; nothing for one process on the file store)
        listener = asyncio.create_task(served.events.run(), name="turn events listener")
        try:
            yield
        finally:
            await turns.wait_all(timeout=shutdown_timeout)
            await served.close_upkeep(timeout=shutdown_timeout)  # memory upkeep after results
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            await served.aclose()

    app = _App(
        title="agentkit",
        version=agentkit.__version__,
        summary="Chat with agentkit agents; turns stream as server-sent events.",
        docs_url=None,  # the interactive pages load scripts from a CDN; this API is local
        redoc_url=None,
        lifespan=lifespan,
    )
    app.openapi = functools.partial(build_openapi, app)  # type: ignore[method-assign]
    app.state.served = served
    app.state.turns = turns
    app.state.policy = policy
    install_error_handlers(app)
    app.include_router(router)
    app.add_middleware(guarded, policy=policy)  # outermost: runs before anything else
    return app
