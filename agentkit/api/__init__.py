"""The HTTP API (seed §16.5): FastAPI routes, SSE streaming of turns, a request guard.

This subpackage imports FastAPI, uvicorn and sse-starlette; ``import agentkit`` never imports
it. ``create_app(data_dir, …)`` builds an app from its collaborators; ``serve(…)`` runs one
under uvicorn (``agentkit serve``).
"""

from agentkit.api.app import DEFAULT_PORT, create_app
from agentkit.api.server import serve

__all__ = ["DEFAULT_PORT", "create_app", "serve"]
