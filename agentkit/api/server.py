"""Running the API under uvicorn (what ``agentkit serve`` does).

The app is built before the socket is bound, so a refused configuration (a non-loopback host
without a token, a malformed token) fails with a :class:`~agentkit.errors.UsageError` and
nothing listening.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import uvicorn

from agentkit.api.app import DEFAULT_PORT, create_app
from agentkit.models.base import ChatModel, SessionBackend

__all__ = ["serve"]


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
) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM); running turns finish before exit."""
    app = create_app(
        data_dir,
        model=model,
        token=token,
        host=host,
        port=port,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
        store=store,
    )
    if announce is not None:
        shown = f"[{host}]" if ":" in host else host
        auth = "a bearer token is required" if token else "no token: loopback clients only"
        announce(f"agentkit: serving {app.state.served.data_dir} on http://{shown}:{port} ({auth})")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        proxy_headers=False,  # never trust X-Forwarded-* from a client
        server_header=False,
        timeout_graceful_shutdown=30,
    )
    uvicorn.Server(config).run()
