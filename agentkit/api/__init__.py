"""The HTTP API (seed §16.5): FastAPI routes, SSE streaming of turns, a request guard.

This subpackage imports FastAPI and uvicorn (the ``serve`` extra: without it,
importing it raises :class:`~agentkit.errors.MissingExtraError`); ``import agentkit`` never
imports it. ``create_app(data_dir, …)`` builds an app from its collaborators; ``serve(…)``
runs one under uvicorn (``agentkit serve``).
"""

from agentkit._extras import missing

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as _missing:
    raise missing("serve", "the HTTP API (agentkit serve)", _missing) from _missing

from agentkit.api.app import DEFAULT_PORT, create_app
from agentkit.api.server import serve

__all__ = ["DEFAULT_PORT", "create_app", "serve"]
