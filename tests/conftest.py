from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentkit import testing

REPO = Path(__file__).resolve().parents[1]
SAMPLE_AGENTS = REPO / "data" / "agents"

#: variables the suite's own harness reads (the browser and fuzz runs, the llama wheel cache);
#: every other AGENTKIT_* / OPENAI_* variable is removed before each test
HARNESS_ENV = (
    "AGENTKIT_REQUIRE_BROWSER",
    "AGENTKIT_SCREENSHOT_DIR",
    "AGENTKIT_FUZZ_SECONDS",
    "AGENTKIT_WHEEL_CACHE",
    "AGENTKIT_REQUIRE_POSTGRES",
    "AGENTKIT_JAI_VENV",
)


@pytest.fixture(autouse=True)
def _no_accidental_model_requests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No test reaches a real model by accident: the shell's AGENTKIT_* / OPENAI_* variables
    are gone, and real backends refuse (also in subprocesses, through the environment) unless
    the test is marked ``real_model`` (the embedded model, or a real server or agent process)."""
    for name in list(os.environ):
        if name.startswith(testing.ENV_PREFIXES) and name not in HARNESS_ENV:
            monkeypatch.delenv(name)
    real = request.node.get_closest_marker("real_model") is not None
    monkeypatch.setenv(testing.ALLOW_ENV, "1" if real else "0")
    with testing.allow_model_requests() if real else testing.block_model_requests():
        yield


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data root holding copies of the sample agents (without their conversations)."""
    return testing.data_root(tmp_path / "data", source=SAMPLE_AGENTS.parent)


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
