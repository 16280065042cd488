"""Loading the pinned ``bfcl-eval`` package: its dataset, checkers and simulated APIs.

Why this module exists: ``bfcl-eval`` (the Berkeley Function Calling Leaderboard, Apache-2.0)
ships its whole dataset and its checkers in the wheel, but its requirements pin
``numpy==1.26.4`` and pull every vendor SDK (anthropic, cohere, mistralai, google-genai,
boto3, sentence-transformers …). So it is installed with ``--no-deps`` at the version pinned
here (:data:`PINNED`: the data and the checker change together), and the few libraries the
parts we use import are agentkit's ``bfcl`` extra.

Two things are done before its first import, both here and nowhere else:

* ``bfcl_eval.constants.model_config`` (BFCL's model registry) imports every vendor SDK at its
  top. The AST checker reads one thing from it: ``MODEL_CONFIG_MAPPING[name].underscore_to_dot``
  (whether a model's function names had their dots turned into underscores). A stand-in module
  holding that entry is put in ``sys.modules`` under that name; it answers ``False`` for any
  model name, because agentkit maps tool names back to BFCL's own before a checker sees them
  (:mod:`agentkit.eval.bfcl.toolset`).
* ``bfcl_eval.constants.eval_config`` creates result, score and lock folders under
  ``$BFCL_PROJECT_ROOT`` at import (by default beside the installed package, in
  site-packages). Unless the variable is set, it is pointed at a folder of agentkit's own
  under the user's cache directory.

A missing or different ``bfcl-eval`` is :class:`BfclNotInstalledError`: one line naming the
install command (exit status 2 on the command line).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agentkit.eval.pinned import PinnedPackageError, check_pinned

__all__ = ["INSTALL", "PINNED", "BfclNotInstalledError", "bfcl_module", "ensure_loaded"]

#: the bfcl-eval release agentkit reads (dataset and checkers)
PINNED: Final = "2026.3.23"
#: how to install it (``make setup`` does this)
INSTALL: Final = (
    f"pip install --no-deps 'bfcl-eval=={PINNED}' && pip install 'agentkit[bfcl]'"
    " (make setup does both)"
)
#: the libraries of the bfcl extra the parts agentkit uses import (top-level names)
_EXTRA_MODULES: Final = ("mpmath", "filelock", "overrides", "dotenv", "tree_sitter", "tqdm")
_STAND_IN: Final = "bfcl_eval.constants.model_config"
_LOCK = threading.Lock()


class BfclNotInstalledError(PinnedPackageError):
    """``bfcl-eval`` (at :data:`PINNED`) or one of the ``bfcl`` extra's libraries is missing."""

    extra_name = "bfcl"
    feature_name = "BFCL"
    package_module = "bfcl_eval"
    install = INSTALL


@dataclass
class _ModelConfig:
    """The one field of BFCL's ``ModelConfig`` its checkers read."""

    underscore_to_dot: bool = False


class _AnyModel(dict[str, _ModelConfig]):
    """``MODEL_CONFIG_MAPPING`` for the checkers: the same entry under every model name."""

    def __missing__(self, key: str) -> _ModelConfig:
        return _ModelConfig()


def _stand_in() -> types.ModuleType:
    module = types.ModuleType(_STAND_IN, "agentkit's stand-in for BFCL's model registry")
    module.ModelConfig = _ModelConfig  # type: ignore[attr-defined]
    module.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    return module


def _project_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agentkit" / "bfcl"


_LOADED: list[bool] = []


def ensure_loaded() -> None:
    """Check that the pinned ``bfcl-eval`` and its few libraries are there, and prepare its
    import (the stand-in registry, its working folder). Idempotent; thread-safe."""
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        check_pinned(
            BfclNotInstalledError,
            "bfcl-eval",
            PINNED,
            changes_together="its data and checkers",
            modules=_EXTRA_MODULES,
            imported_by="bfcl-eval's checkers import",
        )
        if not os.environ.get("BFCL_PROJECT_ROOT"):
            root = _project_root()
            root.mkdir(parents=True, exist_ok=True)
            os.environ["BFCL_PROJECT_ROOT"] = str(root)
        sys.modules.setdefault(_STAND_IN, _stand_in())
        _LOADED.append(True)


def bfcl_module(name: str) -> Any:  # noqa: ANN401 - an untyped third-party module
    """``bfcl_eval.<name>``, imported after :func:`ensure_loaded`."""
    ensure_loaded()
    return importlib.import_module(f"bfcl_eval.{name}")
