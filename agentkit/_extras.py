"""Optional parts of agentkit are extras, checked where they are used.

``pip install agentkit`` is what ``import agentkit``, the CLI and the file store need. The
rest is an extra: ``llama`` (the embedded model), ``serve`` (the HTTP API), ``mcp`` (MCP
toolsets), ``acp`` (the ``acp:`` backend and ``agentkit acp``), ``otel`` (exporting spans),
``lab`` (the workbench), ``eval`` (``agentkit eval``), ``all``. A feature whose extra is
missing raises :class:`~agentkit.errors.MissingExtraError` naming the pip command, before it
writes or starts anything: :func:`require` checks without importing (the embedded model's
libraries load only in its worker process), and modules that import an extra at their top
guard that import the same way (:func:`missing`).
"""

from __future__ import annotations

import importlib.util
from typing import Final

from agentkit.errors import MissingExtraError

__all__ = ["MODEL_ALTERNATIVES", "missing", "require"]

#: what else a user without the ``llama`` extra can run
MODEL_ALTERNATIVES: Final = "or use another model: --model openai:MODEL, --model scripted:FILE"


def require(extra: str, feature: str, *modules: str, hint: str = "") -> None:
    """Raise :class:`MissingExtraError` unless every one of *modules* (top-level names) can
    be imported. Nothing is imported."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(extra, feature, module=module, hint=hint)


def missing(extra: str, feature: str, error: ImportError, *, hint: str = "") -> MissingExtraError:
    """The error for a guarded import that failed with *error*::

    try:
        import fastapi
    except ImportError as error:
        raise missing("serve", "the HTTP API", error) from error
    """
    return MissingExtraError(extra, feature, module=error.name or "", hint=hint)
