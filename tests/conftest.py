from __future__ import annotations

import contextlib
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_AGENTS = REPO / "data" / "agents"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data root holding copies of the sample agents (without their conversations)."""
    root = tmp_path / "data"
    shutil.copytree(
        SAMPLE_AGENTS,
        root / "agents",
        ignore=shutil.ignore_patterns("conversations", ".*.lock"),
    )
    return root


def tree(path: Path) -> set[str]:
    """Every path under *path* (relative), for 'nothing was written' checks."""
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Run ``agentkit ARGS…`` in-process, exactly as the script's ``main`` does."""
    from agentkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return CliResult(code if isinstance(code, int) else 1, out.getvalue(), err.getvalue())
